"""Schedule synthesis (`meshproof synthesize`): search structured plans for a decode merge,
order each with a list scheduler timed by `sim.timing`'s op costs, emit the best as an
ordinary kernel file. The synthesiser is not trusted: the emitted kernel and its verdict
are the certificate (spec/synthesis.md)."""
