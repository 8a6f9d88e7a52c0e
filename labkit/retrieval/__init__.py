"""Search: branches, query rewriters, re-rankers, fusion, pipelines and the table of search modes."""
