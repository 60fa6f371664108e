"""One typed model per file of the release directory, shared by the stage that writes it and every reader.

``base`` holds the strict base model and the load/write helpers; each other module is one file
and its file-name constant: ``lock`` (lock.json), ``build`` (build.json, RELEASE.md),
``provenance`` (provenance.intoto.json), ``plan_check`` (plan-check.json), ``verification``
(verification_summary.json), ``receipt`` (receipts/<cell>.json), ``test_receipt``
(tests/<component>.<suite>.json, hygiene.json), ``summary`` (summary.json), ``archive``
(archive.json), ``gate`` (gate.json), ``publish`` (publish.json) and ``sbom`` (sbom.cdx.json, a
CycloneDX document: its name, its serial number and the view readers need). The documents around them:
``intoto`` (in-toto statements), ``dsse`` (signed envelopes), ``oci`` (registry manifests,
descriptors, indexes, image configs) and ``evidence`` (an evidence file as the publish gate
holds it). ``legacy`` reads the files of today's tool.
"""
