"""``python -m ragloom.cli``: the same as the ``ragloom`` console script."""

if __name__ == "__main__":
    from ragloom.entry import main

    main()
