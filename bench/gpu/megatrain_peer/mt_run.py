"""Run MegaTrain's own examples/sft/train.py, unmodified, with mt_patches applied.
usage: python mt_run.py --config CFG.yaml [other train.py args]
env:   MT_SRC = the folder holding MegaTrain's infinity/ and examples/ (default: the repository's .peer/megatrain)
"""
import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.abspath(os.environ.get("MT_SRC", os.path.join(here, "..", "..", "..", ".peer", "megatrain")))
sys.path.insert(0, here)
sys.path.insert(0, src)

import mt_patches  # noqa: E402

mt_patches.install_all()

train_py = os.path.join(src, "examples", "sft", "train.py")
sys.argv = [train_py] + sys.argv[1:]
runpy.run_path(train_py, run_name="__main__")
