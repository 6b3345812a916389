/**
 * @module cli/args
 * Splits argv into positional words and flags. Value flags take the next word or `=value`.
 * Options are `--name` or one of the short `-h` and `-v`. A word that begins with a single `-`
 * and is longer than a short option is a positional word: a key's kid is base64url, so it can
 * begin with `-`. After `--`, every word is positional.
 */

/** Flags that take a value. */
export const VALUE_FLAGS: ReadonlySet<string> = new Set([
  "--host",
  "--port",
  "--public-url",
  "--base-domain",
  "--data-dir",
  "--name",
  "--expires-in",
  "--project",
  "--slug",
  "--signing-alg",
  "--key-rotation-period",
  "--default-token-lifetime",
  "--custom-domain",
]);
const BOOLEAN_FLAGS = new Set(["--json", "--help", "-h", "--version", "-v"]);

/** A mistake in how the command was called (exit code 2). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

export interface ParsedArgs {
  words: string[];
  values: Record<string, string>;
  switches: Set<string>;
}

export function parseArgs(argv: readonly string[]): ParsedArgs {
  const words: string[] = [];
  const values: Record<string, string> = {};
  const switches = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--") {
      words.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith("-") || (!arg.startsWith("--") && arg.length > 2)) {
      words.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq === -1 ? arg : arg.slice(0, eq);
    if (VALUE_FLAGS.has(name)) {
      const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
      if (value === undefined) throw new UsageError(`${name} needs a value`);
      values[name] = value;
    } else if (BOOLEAN_FLAGS.has(name) && eq === -1) {
      switches.add(name === "-h" ? "--help" : name === "-v" ? "--version" : name);
    } else {
      throw new UsageError(`unknown option ${arg}`);
    }
  }
  return { words, values, switches };
}

/** The settings flags (config/schema.ts): every command takes them. */
const SETTINGS_FLAGS: ReadonlySet<string> = new Set(["--host", "--port", "--public-url", "--base-domain", "--data-dir"]);

/**
 * The options each command takes beyond the settings flags and --json; per action where it has
 * actions. One another command takes is refused, not ignored: `apikeys create --slug acme` would
 * make a key of the default project, and `keys list --slug acme` list its keys.
 */
const OPTIONS: Readonly<Record<string, readonly string[] | Readonly<Record<string, readonly string[]>>>> = {
  serve: [],
  apikeys: { create: ["--name", "--expires-in", "--project"], list: ["--project"], revoke: ["--project"] },
  keys: { list: ["--project"], rotate: ["--project"], revoke: ["--project"] },
  projects: { create: ["--slug", "--name", "--signing-alg", "--key-rotation-period", "--default-token-lifetime", "--custom-domain"], list: [] },
  backup: [],
  restore: [],
  check: [],
};

/**
 * How many positional words each command takes, the command and its action included; per action
 * where it has actions. Commands not listed check their own (check, backup, restore).
 */
const ARITY: Readonly<Record<string, number | Readonly<Record<string, number>>>> = {
  serve: 1,
  apikeys: { create: 2, list: 2, revoke: 3 },
  keys: { list: 2, rotate: 2, revoke: 3 },
  projects: { create: 2, list: 2 },
};

/**
 * Refuses an unknown action and a word more than the command takes, before anything is opened or
 * changed (or created: an unknown action must not start a new data directory): `apikeys
 * revoke ID1 ID2` must not revoke ID1 alone, nor `keys rotate acme` rotate the default project.
 */
export function checkArity(args: ParsedArgs): void {
  const [command, action] = args.words;
  const rule = ARITY[command ?? ""];
  if (typeof rule === "object" && !Object.hasOwn(rule, action ?? "")) {
    const actions = Object.keys(rule);
    throw new UsageError(`unknown ${command} command '${action ?? ""}': use ${actions.slice(0, -1).join(", ")} or ${actions.at(-1)}`);
  }
  const max = typeof rule === "number" ? rule : rule?.[action ?? ""];
  if (max !== undefined && args.words.length > max) {
    throw new UsageError(`unexpected argument '${args.words[max]}'; see 'tokenmint ${command} --help'`);
  }
  const options = OPTIONS[command ?? ""];
  const allowed = options === undefined ? undefined : Array.isArray(options) ? options : (options as Readonly<Record<string, readonly string[]>>)[action ?? ""];
  const stray = Object.keys(args.values).find((flag) => !SETTINGS_FLAGS.has(flag) && allowed?.includes(flag) === false);
  const what = typeof options === "object" && !Array.isArray(options) ? `${command} ${action}` : command;
  if (stray !== undefined) throw new UsageError(`${what} takes no ${stray}; see 'tokenmint ${command} --help'`);
  // serve prints no result: it has no JSON form.
  if (command === "serve" && args.switches.has("--json")) throw new UsageError("serve takes no --json; see 'tokenmint serve --help'");
}
