{#-
  _index.wgsl: the flat invocation index of a 1-D dispatch folded into 2-D.

  Every demo kernel runs one invocation per output element, with @workgroup_size(WG, 1, 1);
  the engine's dispatch helper (webnn_gpu._kernels.workgroups) folds more than 65535
  workgroups into (x, y). The flat index is gid.x + gid.y * (num_workgroups.x * WG);
  kernels return when it is >= their element count.

  Context: workgroup_size (int).
-#}
fn flat_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * (nwg.x * {{ workgroup_size }}u);
}
