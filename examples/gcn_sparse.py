"""gcn_sparse: the gcn example's graph and check, the adjacency stored sparse."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gcn import data, check     # noqa: F401 (example.py calls them)
