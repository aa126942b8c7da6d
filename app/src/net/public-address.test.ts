import { describe, expect, it } from "vitest";
import { ipv6Bytes, nonPublicReason, resolvePublicAddress } from "./public-address.js";
import type { LookupAll } from "./public-address.js";

describe("nonPublicReason", () => {
  it.each([
    "8.8.8.8",
    "1.1.1.1",
    "172.32.0.1",
    "172.15.255.255",
    "100.128.0.1",
    "2606:4700::1111",
    "2001:db8::1",
  ])("lets the public address %s through", (address) => expect(nonPublicReason(address)).toBeUndefined());

  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "link-local"],
    ["100.64.0.1", "shared (CGNAT)"],
    ["100.127.255.255", "shared (CGNAT)"],
    ["0.0.0.0", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "reserved or broadcast"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["::", "unspecified"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["ff02::1", "multicast"],
    ["::ffff:127.0.0.1", "loopback (IPv4 inside IPv6)"],
    ["::ffff:7f00:1", "loopback (IPv4 inside IPv6)"],
    ["::ffff:10.0.0.1", "private (IPv4 inside IPv6)"],
    ["::ffff:169.254.169.254", "link-local (IPv4 inside IPv6)"],
    ["64:ff9b::a9fe:a9fe", "link-local (IPv4 inside IPv6)"],
    ["2002:c0a8:0101::1", "private (IPv4 inside IPv6)"],
  ])("refuses %s (%s)", (address, reason) => expect(nonPublicReason(address)).toBe(reason));

  it("refuses what is not an IP address", () => {
    expect(nonPublicReason("example.com")).toBe("not an IP address");
  });

  it("parses IPv6 with a dotted tail and with a compressed middle", () => {
    expect(ipv6Bytes("::ffff:1.2.3.4")).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 2, 3, 4]);
    expect(ipv6Bytes("1:2::8")).toEqual([0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8]);
  });
});

describe("resolvePublicAddress", () => {
  const dns =
    (answers: Record<string, string[]>): LookupAll =>
    async (host) => {
      const found = answers[host];
      if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
      return found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    };
  const strict = {
    lookup: dns({ "public.test": ["93.184.216.34"], "mixed.test": ["93.184.216.34", "10.0.0.8"] }),
    allowPrivateNetworks: false,
  };

  it("returns the first address of a public name, and IP literals as they are", async () => {
    await expect(resolvePublicAddress("public.test", strict)).resolves.toEqual({
      address: "93.184.216.34",
      family: 4,
    });
    await expect(resolvePublicAddress("[2606:4700::1111]", strict)).resolves.toEqual({
      address: "2606:4700::1111",
      family: 6,
    });
  });

  it("refuses a name when any of its addresses is not public", async () => {
    await expect(resolvePublicAddress("mixed.test", strict)).rejects.toThrow(
      "mixed.test resolves to 10.0.0.8, which is not a public address (private)",
    );
  });

  it("refuses localhost names without asking DNS, and says when a name does not resolve", async () => {
    await expect(resolvePublicAddress("LOCALHOST.", strict)).rejects.toThrow(
      "not a public address (this machine)",
    );
    await expect(resolvePublicAddress("app.localhost", strict)).rejects.toThrow("this machine");
    await expect(resolvePublicAddress("nowhere.test", strict)).rejects.toThrow(
      "Could not resolve nowhere.test (ENOTFOUND)",
    );
  });

  it("allows everything when private networks are allowed", async () => {
    const open = { lookup: dns({ "nas.lan": ["192.168.1.20"] }), allowPrivateNetworks: true };
    await expect(resolvePublicAddress("nas.lan", open)).resolves.toEqual({
      address: "192.168.1.20",
      family: 4,
    });
    await expect(resolvePublicAddress("127.0.0.1", open)).resolves.toEqual({
      address: "127.0.0.1",
      family: 4,
    });
  });
});
