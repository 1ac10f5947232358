/**
 * Starts a real `sluice serve` for the tests: the binary of `SLUICE_BIN`, else the repository's
 * `target/debug/sluice`; a fresh temporary data directory; a free port picked by the server
 * (`--listen 127.0.0.1:0`), read from its ready line. When no binary is found the tests that
 * need it are skipped, unless `CI` is set: then it is a failure.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root: clients/typescript/test/support → four levels up. */
export const repoRoot = resolve(here, "../../../..");

/** The sluice binary, or undefined when there is none. */
export function sluiceBinary(): string | undefined {
  const fromEnv = process.env.SLUICE_BIN;
  if (fromEnv !== undefined && fromEnv !== "") {
    if (!existsSync(fromEnv)) throw new Error(`SLUICE_BIN=${fromEnv} does not exist`);
    return fromEnv;
  }
  const built = join(repoRoot, "target", "debug", "sluice");
  return existsSync(built) ? built : undefined;
}

/** True when a missing service must fail the run instead of skipping. */
export function required(): boolean {
  return process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "false";
}

/** A running server. */
export interface RunningServer {
  url: string;
  stop(): Promise<void>;
}

/** Starts `sluice serve`, with a config file made of `configToml` when given. */
export async function startSluice(
  binary: string,
  configToml?: string,
  env: Record<string, string> = {},
): Promise<RunningServer> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-ts-"));
  const args = ["serve", "--listen", "127.0.0.1:0", "--data", join(dir, "data")];
  if (configToml !== undefined) {
    const config = join(dir, "sluice.toml");
    writeFileSync(config, configToml);
    args.push("--config", config);
  }
  const child = spawn(binary, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const url = await new Promise<string>((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`sluice did not get ready within 30 s:\n${stderr}`));
    }, 30_000);
    let stdout = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /sluice listening on (http:\/\/\S+)/.exec(stdout);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolvePromise(match[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sluice exited with ${code} before it was ready:\n${stderr}`));
    });
  });
  return {
    url,
    stop: () => stop(child, dir),
  };
}

async function stop(child: ChildProcess, dir: string): Promise<void> {
  if (child.exitCode === null) {
    const exited = new Promise<void>((done) => child.once("exit", () => done()));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(dir, { recursive: true, force: true });
}
