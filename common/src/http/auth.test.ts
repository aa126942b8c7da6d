import { describe, it, expect } from "vitest";
import { basicAuthHeader, checkBasicPassword, checkBearer, safeEqual } from "./auth.js";

const basic = (credentials: string): string => "Basic " + Buffer.from(credentials).toString("base64");

describe("safeEqual", () => {
  it("is true only for identical strings", () => {
    expect(safeEqual("secret", "secret")).toBe(true);
    expect(safeEqual("", "")).toBe(true);
    expect(safeEqual("secret", "Secret")).toBe(false);
    expect(safeEqual("secret", "secret ")).toBe(false);
    expect(safeEqual("short", "a much longer string")).toBe(false);
    expect(safeEqual("", "x")).toBe(false);
    expect(safeEqual("pässwörd", "pässwörd")).toBe(true);
  });
});

describe("checkBasicPassword", () => {
  it("accepts the right password whatever the username", () => {
    expect(checkBasicPassword(basic("stavrobot:hunter22"), "hunter22")).toBe(true);
    expect(checkBasicPassword(basic("anyone:hunter22"), "hunter22")).toBe(true);
    expect(checkBasicPassword(basic(":hunter22"), "hunter22")).toBe(true);
  });

  it("keeps colons that are part of the password", () => {
    expect(checkBasicPassword(basic("user:pa:ss:word"), "pa:ss:word")).toBe(true);
    expect(checkBasicPassword(basic("user:pa:ss:word"), "ss:word")).toBe(false);
  });

  it("accepts a lower-case scheme and extra spaces", () => {
    const token = Buffer.from("u:hunter22").toString("base64");
    expect(checkBasicPassword(`basic ${token}`, "hunter22")).toBe(true);
    expect(checkBasicPassword(`Basic   ${token}  `, "hunter22")).toBe(true);
  });

  it("refuses a wrong password", () => {
    expect(checkBasicPassword(basic("stavrobot:hunter2"), "hunter22")).toBe(false);
    expect(checkBasicPassword(basic("stavrobot:"), "hunter22")).toBe(false);
    expect(checkBasicPassword(basic("hunter22:wrong"), "hunter22")).toBe(false);
  });

  it("refuses a missing or empty header", () => {
    expect(checkBasicPassword(undefined, "hunter22")).toBe(false);
    expect(checkBasicPassword("", "hunter22")).toBe(false);
  });

  it("refuses malformed headers", () => {
    expect(checkBasicPassword("Basic", "hunter22")).toBe(false);
    expect(checkBasicPassword("Basic ", "hunter22")).toBe(false);
    expect(checkBasicPassword("Basic !!!not-base64!!!", "hunter22")).toBe(false);
    expect(
      checkBasicPassword(`Basic ${Buffer.from("u:hunter22").toString("base64")} extra`, "hunter22"),
    ).toBe(false);
  });

  it("refuses credentials without a colon, even when they equal the password", () => {
    expect(checkBasicPassword(basic("hunter22"), "hunter22")).toBe(false);
  });

  it("refuses other schemes carrying the same credentials", () => {
    const token = Buffer.from("u:hunter22").toString("base64");
    expect(checkBasicPassword(`Bearer ${token}`, "hunter22")).toBe(false);
    expect(checkBasicPassword(`Digest ${token}`, "hunter22")).toBe(false);
    expect(checkBasicPassword(token, "hunter22")).toBe(false);
  });
});

describe("checkBearer", () => {
  it("accepts the exact token", () => {
    expect(checkBearer("Bearer s3cr3t-token", "s3cr3t-token")).toBe(true);
    expect(checkBearer("bearer s3cr3t-token", "s3cr3t-token")).toBe(true);
    expect(checkBearer("Bearer   s3cr3t-token  ", "s3cr3t-token")).toBe(true);
  });

  it("refuses a wrong, partial or missing token", () => {
    expect(checkBearer("Bearer s3cr3t-tokeN", "s3cr3t-token")).toBe(false);
    expect(checkBearer("Bearer s3cr3t", "s3cr3t-token")).toBe(false);
    expect(checkBearer("Bearer ", "s3cr3t-token")).toBe(false);
    expect(checkBearer("Bearer", "s3cr3t-token")).toBe(false);
    expect(checkBearer(undefined, "s3cr3t-token")).toBe(false);
    expect(checkBearer("", "s3cr3t-token")).toBe(false);
  });

  it("refuses other schemes and tokens with spaces", () => {
    expect(checkBearer("Basic s3cr3t-token", "s3cr3t-token")).toBe(false);
    expect(checkBearer("s3cr3t-token", "s3cr3t-token")).toBe(false);
    expect(checkBearer("Bearer s3cr3t token", "s3cr3t token")).toBe(false);
  });
});

describe("basicAuthHeader", () => {
  it("builds a standard Basic header with the default username", () => {
    const header = basicAuthHeader("hunter22");
    expect(header).toBe("Basic " + Buffer.from("stavrobot:hunter22").toString("base64"));
    expect(header).toMatch(/^Basic [A-Za-z0-9+/=]+$/);
  });

  it("round-trips through checkBasicPassword, including unicode and colons", () => {
    for (const password of ["hunter22", "pä:ss wörd 🔑", "x".repeat(200)]) {
      expect(checkBasicPassword(basicAuthHeader(password), password)).toBe(true);
      expect(checkBasicPassword(basicAuthHeader(password, "someone"), password)).toBe(true);
      expect(checkBasicPassword(basicAuthHeader(password), password + "!")).toBe(false);
    }
  });

  it("decodes to username:password", () => {
    const header = basicAuthHeader("pw", "alice");
    const decoded = Buffer.from(header.slice("Basic ".length), "base64").toString("utf8");
    expect(decoded).toBe("alice:pw");
  });
});
