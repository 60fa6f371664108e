"""One typed model per file of the release directory, shared by the stage that writes it and every reader.

``base`` holds the strict base model and the load/write helpers; each other module is one file:
``lock`` (lock.json), ``build`` (build.json), ``provenance`` (provenance.intoto.json),
``plan_check`` (plan-check.json), ``verification`` (verification_summary.json), ``receipt``
(receipts/<cell>.json) and ``publish`` (publish.json).
"""
