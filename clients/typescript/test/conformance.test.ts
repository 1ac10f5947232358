/**
 * Every scenario of conformance/scenarios.json on every backend. A scenario a backend lists
 * under `exceptions` checks that the backend refuses its distinctive operation with
 * UnsupportedError (and says so in its capabilities), or is skipped with the reason, except
 * when `CI` is set: there an exception without a refusal check fails, so no exempted scenario
 * goes unchecked.
 */
import { describe, it } from "vitest";
import { backendCases } from "./support/backends.js";
import { checkRefusal, forBackend, runScenario } from "./support/runner.js";
import { loadScenarios, loadWorkerScenarios } from "./support/scenarios.js";
import { required } from "./support/server.js";
import { runWorkerScenario, workerBackend } from "./support/worker-runner.js";

const scenarios = loadScenarios();
const workerScenarios = loadWorkerScenarios();

for (const backendCase of backendCases()) {
  describe.skipIf(backendCase.skip !== undefined)(`conformance on ${backendCase.name}`, () => {
    for (const scenario of scenarios) {
      const exception = forBackend(scenario.exceptions, backendCase.scenarioNames);
      if (exception === undefined) {
        it(scenario.name, async () => {
          const backend = await backendCase.make();
          try {
            await runScenario(backend, scenario, backendCase.scenarioNames);
          } finally {
            await backend.close();
          }
        });
      } else {
        it(`${scenario.name} is refused (${exception})`, async (context) => {
          const backend = await backendCase.make();
          try {
            const outcome = await checkRefusal(backend, scenario);
            if (outcome !== "refused") {
              // An exception nobody checks would let a backend claim any scenario away.
              if (required()) {
                throw new Error(
                  `${scenario.name} on ${backendCase.name}: ${exception}; ${outcome} (CI is set, so this fails instead of skipping)`,
                );
              }
              context.skip(`${exception}; ${outcome}`);
            }
          } finally {
            await backend.close();
          }
        });
      }
    }
  });
}

for (const backendCase of backendCases()) {
  describe.skipIf(backendCase.skip !== undefined)(`worker scenarios on ${backendCase.name}`, () => {
    for (const scenario of workerScenarios) {
      it(scenario.name, async () => {
        const backend = await workerBackend(backendCase);
        try {
          await runWorkerScenario(backend, scenario, backendCase.scenarioNames);
        } finally {
          await backend.close();
        }
      });
    }
  });
}
