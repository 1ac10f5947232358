"""One queue interface over interchangeable backends (see `base`)."""
