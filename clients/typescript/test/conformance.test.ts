/**
 * Every scenario of conformance/scenarios.json on every backend. A scenario a backend lists
 * under `exceptions` checks that the backend refuses its distinctive operation with
 * UnsupportedError (and says so in its capabilities), or is skipped with the reason.
 */
import { describe, it } from "vitest";
import { backendCases } from "./support/backends.js";
import { checkRefusal, runScenario } from "./support/runner.js";
import { loadScenarios } from "./support/scenarios.js";

const scenarios = loadScenarios();

for (const backendCase of backendCases()) {
  describe.skipIf(backendCase.skip !== undefined)(`conformance on ${backendCase.kind}`, () => {
    for (const scenario of scenarios) {
      const exception = scenario.exceptions?.[backendCase.kind];
      if (exception === undefined) {
        it(scenario.name, async () => {
          const backend = await backendCase.make();
          try {
            await runScenario(backend, scenario);
          } finally {
            await backend.close();
          }
        });
      } else {
        it(`${scenario.name} is refused (${exception})`, async (context) => {
          const backend = await backendCase.make();
          try {
            const outcome = await checkRefusal(backend, scenario);
            if (outcome !== "refused") context.skip(`${exception}; ${outcome}`);
          } finally {
            await backend.close();
          }
        });
      }
    }
  });
}
