"""Git sources: ``registry`` (add, list, remove), ``sidecars`` and ``selection`` (what a source
ingests), ``sync`` and ``apply`` (bring its indexes to a commit; roll back), ``merges`` (the local
forge's buttons and the deduplicated sync requests a merge makes), ``staging`` (proposal branches),
``cite`` (is a citation still true?), ``credentials`` and ``forge_meter``.

Nothing is re-exported here: import the module that holds the function.
"""
