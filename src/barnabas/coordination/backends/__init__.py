"""One module per coordination backend, each exporting ``async def open_backend(url) -> Metastore``."""
