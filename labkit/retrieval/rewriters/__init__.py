"""Query rewriters: steps that change the query before the branches see it."""
