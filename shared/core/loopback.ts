/**
 * What counts as this machine, in one place: a host name or address only this machine can reach
 * (`localhost`, `127.x.x.x`, `::1`, in brackets or IPv4-mapped), and a `Host` header naming one, with an
 * optional port. Config (plain-http and TLS-bypass exceptions), the embedded host (bind address and its
 * DNS-rebinding check) and participant polling all ask here.
 */
export function isLoopbackHostname(host: string): boolean {
  const name = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  return name === 'localhost' || name === '::1' || /^(::ffff:)?127(\.\d{1,3}){3}$/.test(name);
}

/** A `Host` header (`name[:port]`) that names this machine. */
export function isLoopbackHostHeader(header: string): boolean {
  const match = /^(\[[^\]]+\]|[^:]+)(:\d{1,5})?$/.exec(header.trim());
  return match !== null && isLoopbackHostname(match[1] as string);
}
