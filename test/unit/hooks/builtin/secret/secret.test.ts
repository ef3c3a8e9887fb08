import test from 'ava';
import { render } from '../../../../../hooks/builtin/common/template.ts';
import { chooseKind, keysNeeded, readSecretParams, type SecretParams } from '../../../../../hooks/builtin/secret/params.ts';

test('secretName placeholders come from the Revision', (t) => {
  const values = { revision: 'shop-00002', namespace: 'prod', service: 'shop', configuration: 'shop' };
  t.deepEqual(render('{{service}}-db', values), { value: 'shop-db' });
  t.deepEqual(render('{{ namespace }}-{{revision}}', values), { value: 'prod-shop-00002' });
  t.deepEqual(render('{{service}}-db', { revision: 'r-1', namespace: 'n' }), {
    error: 'cannot fill {{service}} (the Revision has no service) in "{{service}}-db"',
  });
  t.regex((render('{{app}}', values) as { error: string }).error, /\{\{app\}\} \(not a placeholder: use \{\{revision\}\}/);
});

test('params: as env needs env, env needs as env', (t) => {
  t.deepEqual(readSecretParams({ secretName: 'db', requiredKeys: ['a'] }), { secretName: 'db', requiredKeys: ['a'] });
  t.deepEqual(readSecretParams({ secretName: 'db', as: 'env' }), ['params.env ({VARIABLE: "key"}) is required with as: env']);
  t.deepEqual(readSecretParams({ secretName: 'db', as: 'volume', env: { A: 'a' } }), ['params.env is only for as: env']);
  t.deepEqual(readSecretParams({ as: 'file' }), [
    'params.secretName is required',
    'params.as must be one of env, envFrom, volume, got "file"',
  ]);
});

test('the contribution kind must be one the PrestartHook allows', (t) => {
  t.deepEqual(chooseKind('env', ['env', 'volume']), { kind: 'env' });
  t.deepEqual(chooseKind(undefined, ['env', 'volume']), { kind: 'volume' });
  t.deepEqual(chooseKind(undefined, ['envFrom']), { kind: 'envFrom' });
  t.deepEqual(chooseKind('volume', ['env']), {
    error: 'params.as is volume, but the PrestartHook allows only env (spec.contributions.allowed)',
  });
  t.regex((chooseKind(undefined, []) as { error: string }).error, /allows no contributions/);
});

test('the keys waited for include those env refers to', (t) => {
  const p: SecretParams = {
    secretName: 'db',
    requiredKeys: ['user', 'url'],
    as: 'env',
    env: { DATABASE_URL: 'url', PASSWORD: 'password' },
  };
  t.deepEqual(keysNeeded(p), ['user', 'url', 'password']);
});
