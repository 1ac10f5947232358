/** conformance/scenarios.json, typed as conformance/README.md defines it. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./server.js";

export type Json = unknown;

export interface Step {
  op: string;
  body?: Json;
  bodies?: Json[];
  id?: string;
  key?: string;
  delay_ms?: number;
  as?: string | string[];
  max?: number;
  lease_ms?: number;
  wait_ms?: number;
  ref?: string;
  error?: string;
  permanent?: boolean;
  ms?: number;
  timeout_ms?: number;
  message?: string;
  expect?: Json;
  unchecked?: Record<string, string>;
  /** Per backend: the operation it refuses this step as (conformance/README.md, rule 5). */
  refused?: Record<string, string>;
  /** Per backend: the step it runs instead of this one (conformance/README.md, rule 6). */
  on?: Record<string, Step>;
  /** Why a `none` step does nothing. */
  why?: string;
  // Worker scenarios' fields.
  concurrency?: number;
  instance?: number;
  running?: string;
  worker?: Record<string, number>;
  expect_any_order?: Record<string, unknown>[];
}

export interface Scenario {
  name: string;
  doc: string;
  queue: { max_attempts?: number; per_key?: boolean; ordered?: boolean; dedup?: boolean };
  exceptions?: Record<string, string>;
  steps: Step[];
}

interface ScenarioFile {
  version: number;
  scenarios: Scenario[];
  worker_scenarios: Scenario[];
}

function load(): ScenarioFile {
  const path = join(repoRoot, "conformance", "scenarios.json");
  const file = JSON.parse(readFileSync(path, "utf8")) as ScenarioFile;
  if (file.version !== 1) throw new Error(`scenarios.json version ${file.version}: runner knows 1`);
  return file;
}

export function loadScenarios(): Scenario[] {
  return load().scenarios;
}

/** The worker scenarios (conformance/README.md, "Worker scenarios"). */
export function loadWorkerScenarios(): Scenario[] {
  return load().worker_scenarios;
}
