import sys

# kio registers hypothesis strategies for its types whenever hypothesis can be imported (a test
# dependency here); a node or a command never draws test data, so that import (about 0.1 s of
# CPU per process) is skipped: a None entry makes `import hypothesis` fail as if absent.
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from kmirror.cli.main import main  # noqa: E402

raise SystemExit(main())
