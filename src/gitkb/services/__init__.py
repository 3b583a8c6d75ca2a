"""Services: the business logic every interface calls, one subpackage per flow.

The order, lowest first (a package imports only from those before it; tests/test_architecture.py):
``context`` (the shared handle), ``access``, ``derived``, ``runtime``, ``retrieval``, ``indexing``,
``changes``, ``operations``, ``evaluation``, ``dispatch``. Package ``__init__`` files export nothing.
"""
