/** What `apikeys create` and `projects create` accept, checked before the data directory opens. */
import { describe, expect, test } from "bun:test";
import { apiKeyCreateInput } from "../../src/cli/apikeys.ts";
import { parseArgs, UsageError } from "../../src/cli/args.ts";
import { projectCreateInput } from "../../src/cli/projects.ts";
import { loadConfig } from "../../src/config/load.ts";

const KEY = "🔑";
const instance = loadConfig({});

describe("names are 1 to 200 characters counted as code points, as in the API", () => {
  test("apikeys create --name", () => {
    const input = (name: string) => apiKeyCreateInput(parseArgs(["apikeys", "create", "--name", name]));
    expect(input(` ${KEY.repeat(200)} `)).toEqual({ name: KEY.repeat(200), expiresIn: undefined });
    expect(() => input(KEY.repeat(201))).toThrow(UsageError);
    expect(() => input("a\tb")).toThrow(UsageError);
    expect(() => input(" ")).toThrow(UsageError);
  });

  test("projects create --name", () => {
    const input = (name: string) => projectCreateInput(parseArgs(["projects", "create", "--slug", "acme", "--name", name]), instance, 0);
    expect(input(KEY.repeat(200))).toMatchObject({ slug: "acme", name: KEY.repeat(200) });
    expect(() => input(KEY.repeat(201))).toThrow(new UsageError("--name must be 1 to 200 characters without control characters"));
  });
});
