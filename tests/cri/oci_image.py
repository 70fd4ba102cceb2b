"""An OCI image archive of one static binary, written without any registry or image builder.

The containerd suite's sandbox ("pause") image: nothing can be pulled on the test machines, so
the suite writes an OCI image layout (https://github.com/opencontainers/image-spec,
image-layout.md) as a tar: one uncompressed layer holding the binary as /pause, the image
config (entrypoint /pause, linux/amd64 or the machine's architecture), the manifest, and
index.json naming the image by containerd's annotation `io.containerd.image.name`, which
`ctr images import` uses as the image's name. containerd's CRI then finds it by the name in
`sandbox_image` and never pulls.

    /usr/bin/python3 oci_image.py BINARY NAME OUT.tar
"""

import hashlib
import io
import json
import platform
import sys
import tarfile

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le",
         "s390x": "s390x", "riscv64": "riscv64"}


def _tar_bytes(members):
    """A tar (bytes) of (name, data, mode) regular files, owned by root, time 0 (reproducible)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            info.uid = info.gid = 0
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _descriptor(media_type, blob):
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(blob).hexdigest(),
            "size": len(blob)}


def write_image(binary_path, name, out_path):
    """Writes the OCI archive of an image `name` whose entrypoint is `binary_path` as /pause."""
    with open(binary_path, "rb") as f:
        binary = f.read()
    layer = _tar_bytes([("pause", binary, 0o755)])
    layer_desc = _descriptor("application/vnd.oci.image.layer.v1.tar", layer)
    config = json.dumps({
        "architecture": _ARCH.get(platform.machine(), platform.machine()),
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
        "history": [{"created_by": "tests/cri/oci_image.py"}],
    }, sort_keys=True).encode()
    config_desc = _descriptor("application/vnd.oci.image.config.v1+json", config)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
    }, sort_keys=True).encode()
    manifest_desc = _descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
    manifest_desc["annotations"] = {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
    }
    index = json.dumps({"schemaVersion": 2, "manifests": [manifest_desc]}, sort_keys=True).encode()
    members = [("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode(), 0o644),
               ("index.json", index, 0o644)]
    for blob in (layer, config, manifest):
        members.append(("blobs/sha256/" + hashlib.sha256(blob).hexdigest(), blob, 0o644))
    with open(out_path, "wb") as f:
        f.write(_tar_bytes(members))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    write_image(sys.argv[1], sys.argv[2], sys.argv[3])
