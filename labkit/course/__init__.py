"""The course around the code: exercise checks, grading, the notebook engine and the static site."""
