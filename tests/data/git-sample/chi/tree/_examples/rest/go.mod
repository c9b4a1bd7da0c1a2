module rest-example

go 1.16

require (
	github.com/go-chi/chi/v5 v5.0.1
	github.com/go-chi/docgen v1.2.0
	github.com/go-chi/render v1.0.1
)
