"""The numpy reference simulator: `meshproof.sim.api.simulate(schedule, config)`."""
