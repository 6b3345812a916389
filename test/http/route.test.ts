import { describe, expect, test } from "bun:test";
import { parsesAsUrl, pathOf } from "../../src/http/route.ts";

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

describe("parsesAsUrl", () => {
  test("agrees with URL.canParse, first time and remembered, whatever the host part holds", () => {
    // Pieces that make hosts parse or fail: ports out of range, brackets, userinfo, extra
    // slashes and backslashes after the scheme (http ignores them), spaces, percent signs.
    const pieces = ["http:", "https:", "foo:", "//", "/", "\\", "a", "h", "[::1]", "[::1", ":80", ":99999", ":", "@", "u:p@", "?", "#", " ", "%", "%zz", "\t", "é", "256.0.0.1", ".", "x/y"];
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    let parsed = 0;
    for (let i = 0; i < 20000; i++) {
      // Mostly a scheme and slashes first, as a request's URL has them.
      let url = (["http:", "https:", "foo:", ""][random(4)] as string) + (["//", "///", "//\\", "/", ""][random(5)] as string);
      for (let n = 1 + random(6); n > 0; n--) url += pieces[random(pieces.length)];
      const expected = URL.canParse(url);
      if (expected) parsed++;
      expect([url, parsesAsUrl(url)]).toEqual([url, expected]);
      expect([url, parsesAsUrl(url)]).toEqual([url, expected]);
    }
    // Both verdicts were tried many times.
    expect(parsed).toBeGreaterThan(1000);
    expect(parsed).toBeLessThan(19000);
  });

  test("URLs alike up to the authority's first slash share a verdict, others do not", () => {
    for (const [url, expected] of [
      ["http://h/a", true],
      ["http://h/a b", true],
      ["http:///h/a", true],
      ["http:///", false],
      ["http://\\h/a", true],
      ["http://h:99999/a", false],
      ["http://h:99/a", true],
      ["http://[::1/a", false],
      ["http://[::1]/a", true],
      ["http://a b/", false],
      ["/only/a/path", false],
      ["http://h", true],
    ] as const) {
      expect([url, parsesAsUrl(url)]).toEqual([url, expected]);
      expect(URL.canParse(url)).toBe(expected);
    }
  });
});
