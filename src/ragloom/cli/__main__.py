"""``python -m ragloom.cli``: the same as the ``ragloom`` console script."""

from ragloom.cli import main

if __name__ == "__main__":
    main()
