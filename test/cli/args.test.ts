import { describe, expect, test } from "bun:test";
import { checkArity, parseArgs, UsageError, VALUE_FLAGS } from "../../src/cli/args.ts";
import { runsServe } from "../../src/cli/stop-signal.ts";
import { HELP } from "../../src/cli/help.ts";
import { SETTINGS } from "../../src/config/schema.ts";

describe("parseArgs", () => {
  test("splits words, value flags (next word or =value) and switches", () => {
    expect(parseArgs(["apikeys", "create", "--name", "ci", "--expires-in=60", "--json"])).toEqual({
      words: ["apikeys", "create"],
      values: { "--name": "ci", "--expires-in": "60" },
      switches: new Set(["--json"]),
    });
    expect(parseArgs(["-h"]).switches).toEqual(new Set(["--help"]));
    expect(parseArgs(["-v"]).switches).toEqual(new Set(["--version"]));
  });

  test("a kid that begins with '-' is a word, as is every word after '--'", () => {
    const kid = "-2gUiPoQRhGo_Uxr19SApAdigxXNRZ2H4cHP-M8X5ws";
    expect(parseArgs(["keys", "revoke", kid, "--json"])).toEqual({ words: ["keys", "revoke", kid], values: {}, switches: new Set(["--json"]) });
    expect(parseArgs(["keys", "revoke", "--", "--json"]).words).toEqual(["keys", "revoke", "--json"]);
  });

  test("unknown options, and value flags without a value, are usage errors", () => {
    expect(() => parseArgs(["keys", "list", "--jsn"])).toThrow(new UsageError("unknown option --jsn"));
    expect(() => parseArgs(["keys", "list", "-x"])).toThrow(new UsageError("unknown option -x"));
    expect(() => parseArgs(["--json=yes"])).toThrow(UsageError);
    expect(() => parseArgs(["apikeys", "create", "--name"])).toThrow(new UsageError("--name needs a value"));
  });
});

describe("checkArity", () => {
  const check = (...words: string[]) => () => checkArity(parseArgs(words));

  test("an unknown or missing action is a usage error that lists the command's actions", () => {
    expect(check("apikeys", "delete")).toThrow(new UsageError("unknown apikeys command 'delete': use create, list or revoke"));
    expect(check("keys")).toThrow(new UsageError("unknown keys command '': use list, rotate or revoke"));
    expect(check("projects", "show")).toThrow(new UsageError("unknown projects command 'show': use create or list"));
    expect(check("apikeys", "constructor")).toThrow(UsageError);
  });

  test("a word more than the action takes is a usage error; the words it takes pass", () => {
    expect(check("keys", "revoke", "a", "b")).toThrow(new UsageError("unexpected argument 'b'; see 'tokenmint keys --help'"));
    expect(check("serve", "now")).toThrow(new UsageError("unexpected argument 'now'; see 'tokenmint serve --help'"));
    expect(check("keys", "revoke", "a")).not.toThrow();
    expect(check("apikeys", "list", "--json")).not.toThrow();
    expect(check("serve")).not.toThrow();
  });

  test("an option of another command is a usage error, not ignored; the settings flags go with every command", () => {
    // A key for the default project, or its key list, where acme's were meant.
    expect(check("apikeys", "create", "--slug", "acme", "--name", "admin")).toThrow(new UsageError("apikeys create takes no --slug; see 'tokenmint apikeys --help'"));
    expect(check("keys", "list", "--slug", "acme")).toThrow(new UsageError("keys list takes no --slug; see 'tokenmint keys --help'"));
    expect(check("backup", "file", "--expires-in", "5")).toThrow(new UsageError("backup takes no --expires-in; see 'tokenmint backup --help'"));
    expect(check("projects", "list", "--name", "x")).toThrow(UsageError);
    expect(check("serve", "--json")).toThrow(new UsageError("serve takes no --json; see 'tokenmint serve --help'"));
    expect(check("apikeys", "create", "--name", "admin", "--project", "acme", "--expires-in", "60", "--data-dir", "d", "--json")).not.toThrow();
    expect(check("projects", "create", "--slug", "acme", "--custom-domain", "a.example", "--port", "9000")).not.toThrow();
    expect(check("serve", "--port", "9000", "--base-domain", "example.com")).not.toThrow();
    expect(check("check", "--json", "--data-dir", "d")).not.toThrow();
  });
});

describe("which process handles stop signals as it loads", () => {
  test("a serve, whatever flags come first; never a command that a flag's value 'serve' precedes", () => {
    expect(runsServe(["serve"])).toBe(true);
    expect(runsServe(["--port", "9000", "serve", "--data-dir", "d"])).toBe(true);
    // These stop on a signal, as any command does.
    expect(runsServe(["--data-dir", "serve", "check"])).toBe(false);
    expect(runsServe(["apikeys", "create", "--name", "serve"])).toBe(false);
    expect(runsServe(["--bogus", "serve"])).toBe(false);
    expect(runsServe([])).toBe(false);
  });
});

describe("help", () => {
  test("tokenmint --help names every flag that takes a value, and serve --help's usage every flag of serve", () => {
    for (const flag of VALUE_FLAGS) expect({ flag, named: (HELP.main as string).includes(flag) }).toEqual({ flag, named: true });
    const usage = (HELP.serve as string).split("\n")[0] as string;
    for (const { flag } of SETTINGS) if (flag !== undefined) expect({ flag, inUsage: usage.includes(`[${flag} `) }).toEqual({ flag, inUsage: true });
  });
});
