import { describe, expect, it } from "vitest";
import { exactNumber, parseArray } from "./exact-numbers.js";

describe("exactNumber", () => {
  it("gives a number when its JSON text is the same decimal value", () => {
    expect(exactNumber("40.00")).toBe(40);
    expect(exactNumber("12.50")).toBe(12.5);
    expect(exactNumber("-0.000100")).toBe(-0.0001);
    expect(exactNumber("1e+100")).toBe(1e100);
    expect(exactNumber("1.5e-07")).toBe(1.5e-7);
    expect(exactNumber("9007199254740992")).toBe(2 ** 53);
    expect(exactNumber("0")).toBe(0);
    expect(exactNumber("0.1")).toBe(0.1);
  });

  it("keeps the text when a double would change the value", () => {
    expect(exactNumber("9007199254740993")).toBe("9007199254740993");
    expect(exactNumber("0.10000000000000000001")).toBe("0.10000000000000000001");
    expect(exactNumber("123456789012345678901234567890")).toBe("123456789012345678901234567890");
    expect(exactNumber("NaN")).toBe("NaN");
    expect(exactNumber("-Infinity")).toBe("-Infinity");
    expect(exactNumber("1" + "0".repeat(400))).toBe("1" + "0".repeat(400));
    expect(exactNumber("")).toBe("");
  });
});

describe("parseArray", () => {
  it("reads nested arrays, NULL, quoted elements and explicit bounds", () => {
    expect(parseArray("{}", exactNumber)).toEqual([]);
    expect(parseArray("{1.50,NULL,-2}", exactNumber)).toEqual([1.5, null, -2]);
    expect(parseArray("{{1,2},{3,9007199254740993}}", exactNumber)).toEqual([
      [1, 2],
      [3, "9007199254740993"],
    ]);
    expect(parseArray("[0:1]={7,8}", exactNumber)).toEqual([7, 8]);
    expect(parseArray('{"1.5",NaN}', exactNumber)).toEqual([1.5, "NaN"]);
  });
});
