"""Orchestration above verify/ and sim/: one pipeline (`pipeline.run_case`), one judge
(`judge.judge`), the proof matrix (`matrix`), its cache (`cache`), the gate run
(`runner`) and its JUnit report (`junit`)."""
