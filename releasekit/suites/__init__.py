"""The test stage: component test suites in the candidate image, judged against a baseline; source hygiene."""
