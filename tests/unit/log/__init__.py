"""Tests of barnabas.log, one module per log module, on real files in tmp_path."""
