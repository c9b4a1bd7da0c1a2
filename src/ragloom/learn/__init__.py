"""What ragloom learns from a repository it indexes: the per-repository adaptation of the
learned ranking model (:mod:`ragloom.learn.adapt`)."""
