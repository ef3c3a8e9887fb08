// The one key ring test requests are signed with (the gate's correlation key in a test), and
// another gate's, whose ids look right but must not verify here.
import { KeyRing } from '../../schemas/index.ts';

export const keys = KeyRing.fromHex('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f');
export const foreignKeys = new KeyRing([KeyRing.generateKey()]);
