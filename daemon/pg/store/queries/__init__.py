"""Every SQL statement of the PostgreSQL store, by name.

Each statement is one constant built at import and whatever varies is a parameter, so no SQL
is put together at run time.
"""
