import { describe, expect, it } from 'vitest';
import { certificateIdentity, peerIdentity } from './peer-identity.js';

describe('peerIdentity', () => {
  it("names the caller by its certificate's diffmesh URI SAN, else another URI SAN, else its CN", () => {
    const subject = { CN: 'dit-1' };
    expect(certificateIdentity({ subject, subjectaltname: 'URI:spiffe://x/y, DNS:localhost, URI:urn:diffmesh:stage:dit-tiny' })).toBe(
      'urn:diffmesh:stage:dit-tiny',
    );
    expect(certificateIdentity({ subject, subjectaltname: 'DNS:localhost, URI:spiffe://mesh/ops' })).toBe('spiffe://mesh/ops');
    expect(certificateIdentity({ subject, subjectaltname: 'DNS:localhost, IP Address:127.0.0.1' })).toBe('dit-1');
    expect(certificateIdentity({ subject: { CN: ['a', 'b'] } })).toBe('a');
  });

  it('is undefined for a plaintext call or a caller without a verified certificate', () => {
    expect(peerIdentity({ getAuthContext: () => null })).toBeUndefined();
    expect(peerIdentity({ getAuthContext: () => ({}) })).toBeUndefined();
  });
});
