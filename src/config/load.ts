/**
 * @module config/load
 * Resolves the settings table against the environment and command-line flags. Every problem is
 * collected, so a bad start-up reports all of them at once.
 */
import { SETTINGS, type Config } from "./schema.ts";

/** Raised when settings are invalid; `problems` lists each one. */
export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: string[]) {
    super(problems.join("; "));
    this.name = "ConfigError";
    this.problems = problems;
  }
}

/** Flags that take a value, mapped to the env variable they override. */
export const FLAG_TO_ENV: Readonly<Record<string, string>> = Object.fromEntries(
  SETTINGS.filter((s) => s.flag !== undefined).map((s) => [s.flag as string, s.env]),
);

/**
 * Builds the Config from environment variables and flags (`--port 9000` or `--port=9000`).
 * Flags win over the environment. Throws ConfigError listing every problem.
 */
export function loadConfig(env: Record<string, string | undefined>, flags: Record<string, string> = {}): Config {
  const problems: string[] = [];
  const partial: Partial<Config> = {};
  for (const setting of SETTINGS) {
    const raw = setting.flag !== undefined && setting.flag in flags ? flags[setting.flag] : env[setting.env];
    const value = setting.parse(raw, partial);
    if (value !== null && typeof value === "object" && "problem" in value) problems.push(value.problem);
    else (partial as Record<string, unknown>)[setting.key] = value;
  }
  if (problems.length > 0) throw new ConfigError(problems);
  partial.credentialsDirectory = env.CREDENTIALS_DIRECTORY || undefined;
  return partial as Config;
}
