{#-
  _rgb8.wgsl: helpers for RGB8 frames packed in u32 words (included by the demo shaders).

  A frame of W x H pixels is the raw `rgb24` byte stream FFmpeg produces (row-major,
  3 bytes per pixel, R then G then B), uploaded as is into `array<u32>`: byte i sits in
  word i / 4 at bits 8 * (i % 4) (little-endian, as every WebGPU platform stores it).
  The buffer holds ceil(3 * W * H / 4) words; the padding bytes of the last word are 0.

  Context: frame_var (str): the name of the module-scope `array<u32>` holding the frame.
  Provides: rgb8_byte(i) -> u32 and rgb8_pixel(p) -> vec3<f32> in [0, 1].
-#}
fn rgb8_byte(i: u32) -> u32 {
    return ({{ frame_var }}[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn rgb8_pixel(p: u32) -> vec3<f32> {
    let b = 3u * p;
    return vec3<f32>(f32(rgb8_byte(b)), f32(rgb8_byte(b + 1u)), f32(rgb8_byte(b + 2u))) / 255.0;
}
