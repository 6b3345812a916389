import { describe, expect, test } from "bun:test";
import { pathOf } from "../../src/http/route.ts";

describe("pathOf", () => {
  test("is the pathname of a request's URL, query and host excluded", () => {
    for (const url of [
      "http://127.0.0.1:8080/v1/providers",
      "https://tokens.example.test/.well-known/jwks?x=1&y=/z",
      "http://h/",
      "http://h",
      "http://h?q=/v1",
      "http://h/oauth//token",
      "http://h/a/../v1/providers/%2e%2e/x",
      "http://h/caf%C3%A9/t%20x",
      "http://user:pw@h:1/v1/project#frag",
      "http://h/v1/project#f?x",
      "http://h/v1/project?x#f",
    ]) {
      const request = new Request(url);
      expect(pathOf(request.url)).toBe(new URL(request.url).pathname);
    }
  });

  test("a URL without a path is '/', even when its query or fragment holds a slash", () => {
    for (const url of ["http://h", "http://h:8080", "http://h?q=/v1", "http://h#/v1/x", "http://u@h?x=//a/b"]) {
      expect(pathOf(url)).toBe("/");
      expect(new URL(url).pathname).toBe("/");
    }
  });

  test("a URL that is only a path (no usable Host header) is read as that path", () => {
    expect(pathOf("/v1/providers/x")).toBe("/v1/providers/x");
    expect(pathOf("/v1/providers?next=http://h/other")).toBe("/v1/providers");
    expect(pathOf("/.well-known/jwks#x")).toBe("/.well-known/jwks");
    expect(pathOf("/")).toBe("/");
  });
});
