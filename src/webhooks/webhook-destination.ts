import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { StagecoachError } from '../errors/errors.js';

/**
 * Where a webhook may be delivered (docs/security.md, "Webhooks"). A tenant names the URL, and the
 * admin server POSTs to it from inside the operator's network: unless the operator allows it
 * (`webhooks.allow_private_addresses`), no delivery may reach an address that is not public.
 * The host is checked when a subscription is created or changed (a literal address, `localhost`)
 * and again at every attempt, after DNS: every address the name resolves to must be public, and
 * the connection goes to the address checked (the lookup below), so a name that resolves anew
 * (DNS rebinding) cannot swap in an internal one between the check and the connection.
 */

/** Not public: loopback, private, shared, link-local (cloud metadata), unspecified, multicast, reserved. */
const INTERNAL = new BlockList();
for (const [network, bits] of [
  ['0.0.0.0', 8], // "this network", 0.0.0.0 reaches the local host
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, 169.254.169.254 the clouds' metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  INTERNAL.addSubnet(network, bits, 'ipv4');
for (const [network, bits] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96], // NAT64: an IPv4 address inside
  ['100::', 64],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const)
  INTERNAL.addSubnet(network, bits, 'ipv6');

/** Whether an IP address is internal (IPv4-mapped IPv6 addresses are judged as their IPv4 address). */
export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  return INTERNAL.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** The host of a URL without IPv6 brackets (`[::1]` -> `::1`). */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** A host that names this machine without DNS. */
function isLocalName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * Why a subscription's URL is refused without DNS (a literal internal address, `localhost`), or
 * undefined. Names are resolved at each delivery instead: what they resolve to changes.
 */
export function refusedHost(url: URL): string | undefined {
  const host = hostOf(url);
  if (isLocalName(host)) return `"${host}" is this machine`;
  if (isIP(host) !== 0 && isInternalAddress(host)) return `${host} is an internal address (loopback, private, link-local or reserved)`;
  return undefined;
}

/** A delivery refused because of where it would go: given up, not retried. */
export class RefusedDestinationError extends StagecoachError {
  constructor(message: string) {
    super('INVALID_REQUEST', message);
  }
}

/**
 * The DNS lookup of deliveries (`http.request`'s `lookup`): resolves every address of the name,
 * refuses them all when any is internal, and hands the socket only addresses it checked.
 */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
    if (err !== null) {
      callback(err, '', 0);
      return;
    }
    const internal = addresses.find((entry) => isInternalAddress(entry.address));
    if (internal !== undefined || addresses.length === 0) {
      callback(
        new RefusedDestinationError(
          internal === undefined
            ? `"${hostname}" resolves to no address`
            : `"${hostname}" resolves to ${internal.address}, an internal address (set webhooks.allow_private_addresses to deliver there)`,
        ),
        '',
        0,
      );
      return;
    }
    if (options.all === true) (callback as unknown as (err: null, addresses: LookupAddress[]) => void)(null, addresses);
    else callback(null, (addresses[0] as LookupAddress).address, (addresses[0] as LookupAddress).family);
  });
};
