"""Every SQL statement of the PostgreSQL store, by name.

Nothing here is built at run time: each statement is one constant (some put together at import
from fragments and from the rules' own homes), and whatever varies is a parameter (``$1``...).
``claim``: finding and leasing due jobs; ``runs``: what the runner writes after; ``admin``:
``runbroker migrate`` and ``runbroker jobs``. The schema itself is in ``../migrations``.
"""
