"""Helpers for the tests that are not tests themselves (pytest collects nothing here).

Imported as ``support.<module>``: pytest's default ("prepend") import mode puts
``tests/`` first on the import path for the test modules in it, so this package is found
there, under plain ``pytest`` and under ``pytest -n`` (xdist) alike.

* ``traversal_reference``: the pure-Python reference traversal, the tests'
  oracle for the Rust one (``bench/bench_traversal.py`` also times it);
* ``bench``: runs a ``bench/`` script as a user does, in a child process.
"""
