"""Keras architectures converted by TensorFlow's own converter, against LiteRT XNNPACK.

    .venv/bin/python benchmarks/keras_zoo.py                      # generate (once), compare, time
    .venv/bin/python benchmarks/keras_zoo.py --models transformer gru --rounds 10 --no-cold
    .venv/bin/python benchmarks/keras_zoo.py --regenerate         # convert again
    .venv/bin/python benchmarks/keras_zoo.py --standard --no-cold --rounds 10   # the applications at 224x224 / 299x299
    .venv/bin/python benchmarks/keras_zoo.py --slow --no-cold --rounds 5        # NASNetMobile, InceptionResNetV2 (small)

Two halves in one file:

* **generate** (``--generate DIR``, run by the TensorFlow environment's Python, by
  default ``~/.cache/webnn-gpu/bench/venv-tf2onnx/bin/python``, or ``--tf-python``):
  builds well-known Keras architectures with seeded random weights (Keras applications
  with ``weights=None``, a U-Net, a Transformer encoder, a ViT, recurrent text models,
  ...), converts each with ``tf.lite.TFLiteConverter.from_keras_model`` exactly as a
  user would (batch size left open; default float options; ``mobilenet_v2_int8`` and
  ``transformer_int8`` with ``optimizations=[tf.lite.Optimize.DEFAULT]``, int8 weights;
  ``lstm_f16`` with float16 weights as well; ``layers_flex`` with ``SELECT_TF_OPS``), and writes
  ``<name>.tflite`` to ``$XDG_CACHE_HOME/webnn-gpu/keras_zoo/`` (never to the repository).
  A model with Select TF ("Flex") ops, which LiteRT's Python interpreter cannot run, also gets
  ``<name>.ref.npz``: the seeded inputs and the Keras model's output in TensorFlow.
* **compare** (the project's venv): for every model, ``webnn.load`` and LiteRT (builtin
  kernels) on one seeded input (floats: standard normal; token ids: uniform in [0, 20));
  **max error** is the largest difference relative to the output's largest magnitude
  (the issue's tolerances: 1e-3 in float32, 3e-2 with ``--dtype float16``); then the
  **latency** median of ``--rounds`` rounds, webnn-gpu's tensor path (write, dispatch, read) against LiteRT's
  XNNPACK delegate with 2 threads, alternating inside each round; the **kernels** per
  dispatch; and the **first build** (``webnn.load`` in a fresh process with Mesa's
  shader cache disabled).

A model that does not load is a row with the error's first line. The timings only mean
something as ratios taken in the same run on the same machine.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import subprocess
import sys
import time

DEFAULT_TF_PYTHON = pathlib.Path.home() / ".cache" / "webnn-gpu" / "bench" / "venv-tf2onnx" / "bin" / "python"

#: name -> what the model is (the generator's architectures, in table order).
MODELS = {
    "mobilenet_v2": "keras.applications.MobileNetV2(alpha=0.5), 128x128",
    "mobilenet_v2_int8": "the same, converted with Optimize.DEFAULT (int8 weights)",
    "mobilenet_v3_small": "keras.applications.MobileNetV3Small, 128x128 (Rescaling, hard-swish, squeeze-excite)",
    "resnet50": "keras.applications.ResNet50, 64x64",
    "densenet121": "keras.applications.DenseNet121, 64x64",
    "efficientnet_b0": "keras.applications.EfficientNetB0, 96x96 (Normalization, swish, squeeze-excite)",
    "xception": "keras.applications.Xception, 71x71 (separable convolutions)",
    "inception_v3": "keras.applications.InceptionV3, 75x75 (1x7/7x1 convolutions, average pooling branches)",
    "efficientnet_v2_b0": "keras.applications.EfficientNetV2B0, 64x64 (fused MBConv, Rescaling + Normalization)",
    "convnext_tiny": "keras.applications.ConvNeXtTiny, 32x32 (7x7 depthwise, LayerNormalization, layer scale)",
    "resnet50_v2": "keras.applications.ResNet50V2, 64x64 (pre-activation residual blocks)",
    "vgg16": "keras.applications.VGG16, 32x32 (3x3 convolutions, Flatten, Dense 4096)",
    "mobilenet_v3_small_minimal": "keras.applications.MobileNetV3Small(minimalistic=True), 96x96 (relu, 3x3 only, "
                                  "no squeeze-excite)",
    "unet": "U-Net, 64x64x3 -> 2 classes (Conv2D, MaxPool, Conv2DTranspose, UpSampling2D, Concatenate)",
    "transformer": "Embedding + position embedding + MultiHeadAttention + LayerNormalization + GELU Dense, 32 tokens",
    "vit": "ViT: Conv2D patches + class token + 2 encoder blocks (MHA, LayerNormalization, GELU), 32x32",
    "conv1d": "Embedding + Conv1D + MaxPooling1D + GlobalMaxPooling1D, 64 tokens",
    "lstm": "Embedding + LSTM(32) + Dense, 20 tokens",
    "gru": "Embedding + GRU(32, return_sequences) + GRU(32), 20 tokens",
    "simple_rnn": "Embedding + SimpleRNN(32) + Dense, 20 tokens",
    "bilstm": "Embedding + Bidirectional(LSTM(16, return_sequences)) + LSTM(16), 20 tokens",
    "slicing": "tf.strided_slice, tf.gather, tf.tile, tf.split, tf.concat on a [1, 16, 24] input",
    "layers_2d": "everyday image layers: ZeroPadding2D, SeparableConv2D, DepthwiseConv2D (multiplier 2, dilation 2), PReLU, LeakyReLU, "
                 "Conv2DTranspose, UpSampling2D, Cropping2D, GroupNormalization, Resizing, GlobalMaxPooling2D",
    "layers_seq": "everyday sequence layers: Bidirectional(GRU), TimeDistributed(Dense), Attention, Conv1DTranspose, "
                  "UpSampling1D, RepeatVector, Permute, Dot, UnitNormalization, LSTM(return_state)",
    "mobilenet_v3_large": "keras.applications.MobileNetV3Large, 96x96",
    "convnext_block": "ConvNeXt-tiny-like: 4x4 patch stem, 3 blocks of DepthwiseConv2D 7x7, LayerNormalization over "
                      "channels, Dense 4x + GELU, Dense, layer scale, residual; 64x64",
    "autoencoder": "dense autoencoder 784 -> 256 -> 64 -> 16 -> 64 -> 256 -> 784 (relu, sigmoid)",
    "seq2seq": "encoder-decoder Transformer: encoder self-attention, decoder MultiHeadAttention with a causal mask "
               "and cross-attention, LayerNormalization, 24 + 16 tokens",
    "lstm_seq2seq": "encoder-decoder LSTM: the encoder's final states start the decoder (initial_state), "
                    "TimeDistributed Dense + softmax, 12 + 10 tokens",
    "conv_autoencoder": "convolutional autoencoder 28x28x1: Conv2D + MaxPooling2D down, Conv2DTranspose and "
                        "UpSampling2D up, sigmoid",
    "mobilenet_v1": "keras.applications.MobileNet(alpha=0.5), 128x128",
    "conv3d": "video-like 8x16x16x3 clip: Conv3D (SAME, relu), Conv3D (1x3x3, strides 1x2x2), Conv3DTranspose "
              "(strides 2), GlobalAveragePooling3D, Dense",
    "rnn_variants": "Embedding + Bidirectional(GRU, merge sum) + Bidirectional(SimpleRNN, merge ave) + "
                    "GRU(reset_after=False, go_backwards), 20 tokens",
    "transformer_int8": "the transformer, converted with Optimize.DEFAULT (int8 weights and embedding tables)",
    "lstm_f16": "the LSTM text model, converted with float16 weights",
    "top_k": "Dense classifier head with tf.math.top_k (k=3: values and indices) and a sort of its scores",
    "masked_rnn": "Embedding(mask_zero=True) + Bidirectional(LSTM(16, return_sequences)) + GRU(16) + Dense, "
                  "20 tokens (masked loops)",
    "rnn_dropout": "Embedding + Bidirectional(LSTM(16, dropout, recurrent_dropout, return_sequences)) + "
                   "GRU(16, recurrent_dropout) + Dense, 20 tokens (seed-generator state, one product per gate)",
    "augmented_cnn": "RandomFlip, RandomRotation, RandomZoom (identity at inference), Rescaling, Conv2D, MaxPooling2D, "
                     "GroupNormalization, Dense, 32x32",
    "spectrogram": "audio classifier: tf.signal.stft magnitude (RFFT2D, COMPLEX_ABS) of 4000 samples, log, Conv1D, "
                   "GlobalAveragePooling1D, Dense",
    "layers_image": "more image layers: Resizing(crop_to_aspect_ratio), Conv2D(groups=4, dilation_rate=2), mish, "
                    "ReLU(max_value, negative_slope, threshold), SpatialDropout2D, CenterCrop, Resizing(nearest), "
                    "LayerNormalization(rms_scaling), local_response_normalization, MultiHeadAttention(attention_axes=(1, 2)), "
                    "Flatten, Dense + BatchNormalization, selu, "
                    "log_softmax",
    "layers_seq2": "more sequence layers: Conv1D(causal, dilated), DepthwiseConv1D, SeparableConv1D, AveragePooling1D, "
                   "MultiHeadAttention(causal, key_dim != value_dim), GroupQueryAttention, AdditiveAttention, "
                   "EinsumDense, Softmax(axis=1), GRU(go_backwards, return_state), LSTM(unroll), cumsum",
    "layers_video": "ConvLSTM2D(strides 2, return_sequences) + ConvLSTM2D(same), ZeroPadding3D, Cropping3D, UpSampling3D, "
                    "GlobalMaxPooling2D, 4x16x16x3 clip",
    "layers_flex": "layers with no TFLite builtin, converted with SELECT_TF_OPS (Flex ops; reference: Keras in "
                   "TensorFlow): Resizing(bicubic), Conv3D, MaxPooling3D, AveragePooling3D(same), "
                   "Conv2DTranspose(dilation_rate=2), UpSampling2D(bicubic), 4x12x12x3 clip",
}

#: Keras applications at the input size they are published for (opt-in: ``--models NAME`` or
#: ``--standard``; their conversion, LiteRT reference and cold builds take minutes).
STANDARD = {
    "mobilenet_v2_224": "keras.applications.MobileNetV2 (alpha 1.0), 224x224",
    "mobilenet_v3_large_224": "keras.applications.MobileNetV3Large, 224x224",
    "resnet50_224": "keras.applications.ResNet50, 224x224",
    "efficientnet_b0_224": "keras.applications.EfficientNetB0, 224x224",
    "densenet121_224": "keras.applications.DenseNet121, 224x224",
    "xception_299": "keras.applications.Xception, 299x299",
}


#: Small-size applications whose conversion alone takes more than a minute here (opt-in, by
#: name: ``--models NAME``, or ``--slow`` for all of them; about 1.5-2 minutes each on the 2-core
#: machine).
SLOW = {
    "nasnet_mobile": "keras.applications.NASNetMobile, 32x32 (searched cells: separable convolutions, cropping, "
                     "average pooling without the padding in its divisor)",
    "inception_resnet_v2": "keras.applications.InceptionResNetV2, 75x75 (scaled residual branches)",
}


def cache_dir() -> pathlib.Path:
    """Where the converted models live: ``$XDG_CACHE_HOME/webnn-gpu/keras_zoo``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "webnn-gpu" / "keras_zoo"


# ----------------------------------------------------------------------------- generate (TF env)


def _architectures():
    """name -> (build() -> keras.Model, converter options). Imports TensorFlow."""
    import keras
    import tensorflow as tf
    from keras import layers

    apps = keras.applications

    def app(fn, hw, **kw):
        return lambda: fn(input_shape=(hw, hw, 3), weights=None, classes=10, **kw)

    def transformer():
        vocab, length, dim = 1000, 32, 64
        ids = keras.Input((length,), dtype="int32")
        pos = keras.ops.arange(length)
        x = layers.Embedding(vocab, dim)(ids) + layers.Embedding(length, dim)(pos)
        att = layers.MultiHeadAttention(num_heads=4, key_dim=dim // 4)(x, x)
        x = layers.LayerNormalization(epsilon=1e-6)(x + att)
        ff = layers.Dense(dim, activation="linear")(layers.Dense(4 * dim, activation="gelu")(x))
        x = layers.LayerNormalization(epsilon=1e-6)(x + ff)
        x = layers.GlobalAveragePooling1D()(x)
        return keras.Model(ids, layers.Dense(5, activation="softmax")(x))

    def vit():
        dim, patch = 48, 4
        img = keras.Input((32, 32, 3))
        x = layers.Conv2D(dim, patch, strides=patch)(img)
        x = layers.Reshape((-1, dim))(x)

        class ClassToken(layers.Layer):
            def build(self, shape):
                self.cls = self.add_weight(shape=(1, 1, dim), initializer="random_normal")
                self.pos = self.add_weight(shape=(1, shape[1] + 1, dim), initializer="random_normal")

            def call(self, x):
                cls = keras.ops.broadcast_to(self.cls, (keras.ops.shape(x)[0], 1, dim))
                return keras.ops.concatenate([cls, x], axis=1) + self.pos

        x = ClassToken()(x)
        for _ in range(2):
            y = layers.LayerNormalization(epsilon=1e-6)(x)
            x = x + layers.MultiHeadAttention(num_heads=3, key_dim=dim // 3)(y, y)
            y = layers.LayerNormalization(epsilon=1e-6)(x)
            x = x + layers.Dense(dim)(layers.Dense(2 * dim, activation=keras.activations.gelu)(y))
        x = layers.LayerNormalization(epsilon=1e-6)(x)
        return keras.Model(img, layers.Dense(10)(x[:, 0]))

    def unet():
        img = keras.Input((64, 64, 3))
        skips, x = [], img
        for f in (16, 32, 64):
            x = layers.Conv2D(f, 3, padding="same", activation="relu")(x)
            x = layers.Conv2D(f, 3, padding="same", activation="relu")(x)
            skips.append(x)
            x = layers.MaxPooling2D()(x)
        x = layers.Conv2D(128, 3, padding="same", activation="relu")(x)
        for f, skip in zip((64, 32, 16), reversed(skips)):
            if f == 32:
                x = layers.Conv2D(f, 1)(layers.UpSampling2D(interpolation="bilinear")(x))
            else:
                x = layers.Conv2DTranspose(f, 2, strides=2, padding="same")(x)
            x = layers.Concatenate()([x, skip])
            x = layers.Conv2D(f, 3, padding="same", activation="relu")(x)
            x = layers.BatchNormalization()(x)
        return keras.Model(img, layers.Conv2D(2, 1, activation="softmax")(x))

    def text(body, length=20, vocab=500):
        # TensorFlow's converter lowers a Keras 3 recurrent layer only with a static batch size.
        def build():
            ids = keras.Input((length,), dtype="int32", batch_size=1)
            x = layers.Embedding(vocab, 24)(ids)
            return keras.Model(ids, body(x))
        return build

    def conv1d():
        ids = keras.Input((64,), dtype="int32")
        x = layers.Embedding(800, 32)(ids)
        x = layers.Conv1D(32, 5, padding="same", activation="relu")(x)
        x = layers.MaxPooling1D(2)(x)
        x = layers.Conv1D(48, 3, dilation_rate=2, activation="relu")(x)
        x = layers.GlobalMaxPooling1D()(x)
        return keras.Model(ids, layers.Dense(3, activation="sigmoid")(x))

    def slicing():
        inp = keras.Input((16, 24))

        class Slicing(layers.Layer):
            def call(self, x):
                a = tf.strided_slice(x, [0, 1, 0], [0, 15, 24], [1, 2, 3], begin_mask=1, end_mask=1)
                b = tf.gather(x, [3, 0, 7, 7], axis=1)
                c = tf.tile(x[:, :2, ::-1], [1, 3, 1])
                d0, d1, d2 = tf.split(x, [8, 8, 8], axis=2)
                e = tf.concat([d2 * d0, d1], axis=1)
                return tf.concat([tf.reshape(a, [-1, 7 * 8]), tf.reshape(b, [-1, 96]), tf.reshape(c, [-1, 144]),
                                  tf.reshape(e, [-1, 256]), x[:, -1, 4:12]], axis=1)

        return keras.Model(inp, Slicing()(inp))

    def layers_2d():
        img = keras.Input((32, 32, 3))
        x = layers.ZeroPadding2D(((1, 2), (0, 1)))(img)
        x = layers.SeparableConv2D(16, 3, strides=2, activation="elu")(x)
        x = layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same", dilation_rate=2)(x)
        x = layers.PReLU(shared_axes=[1, 2])(x)
        x = layers.LeakyReLU(negative_slope=0.2)(layers.Conv2D(16, 3, padding="same")(x))
        y = layers.Conv2DTranspose(8, 3, strides=2, padding="valid")(x)
        y = layers.Cropping2D(((1, 0), (0, 1)))(y)
        z = layers.UpSampling2D(2, interpolation="nearest")(layers.Conv2D(8, 1)(x))
        x = layers.Concatenate()([y, z])
        x = layers.GroupNormalization(groups=4)(x)
        x = layers.Resizing(20, 24, interpolation="bilinear")(x)
        x = layers.AveragePooling2D(3, strides=2, padding="same")(x)
        return keras.Model(img, layers.Dense(6)(layers.GlobalMaxPooling2D()(x)))

    def layers_seq():
        ids = keras.Input((16,), dtype="int32", batch_size=1)
        x = layers.Embedding(300, 16)(ids)
        x = layers.Bidirectional(layers.GRU(8, return_sequences=True))(x)
        x = layers.TimeDistributed(layers.Dense(12, activation="swish"))(x)
        x = layers.Attention(use_scale=True)([x, x])
        x = layers.Conv1DTranspose(8, 3, strides=2, padding="same")(x)
        x = layers.UpSampling1D(2)(layers.MaxPooling1D(4)(x))
        out, h, c = layers.LSTM(10, return_state=True, return_sequences=True)(x)
        v = layers.UnitNormalization()(layers.RepeatVector(3)(h))
        p = layers.Permute((2, 1))(out)
        d = layers.Dot(axes=(1, 2))([p, v])
        return keras.Model(ids, [layers.Flatten()(d), c])

    class LayerScale(layers.Layer):  # ConvNeXt's per-channel scale of the residual branch
        def build(self, shape):
            self.gamma = self.add_weight(shape=(shape[-1],), initializer="ones")

        def call(self, x):
            return x * self.gamma

    def convnext_block():
        dim = 48
        img = keras.Input((64, 64, 3))
        x = layers.LayerNormalization(epsilon=1e-6)(layers.Conv2D(dim, 4, strides=4)(img))
        for _ in range(3):
            y = layers.DepthwiseConv2D(7, padding="same")(x)
            y = layers.LayerNormalization(epsilon=1e-6)(y)
            y = layers.Dense(dim)(layers.Dense(4 * dim, activation="gelu")(y))
            x = layers.Add()([x, LayerScale()(y)])
        x = layers.LayerNormalization(epsilon=1e-6)(layers.GlobalAveragePooling2D()(x))
        return keras.Model(img, layers.Dense(10)(x))

    def autoencoder():
        inp = keras.Input((784,))
        x = inp
        for units in (256, 64):
            x = layers.Dense(units, activation="relu")(x)
        x = layers.Dense(16)(x)
        for units in (64, 256):
            x = layers.Dense(units, activation="relu")(x)
        return keras.Model(inp, layers.Dense(784, activation="sigmoid")(x))

    def seq2seq():
        vocab, src_len, tgt_len, dim = 400, 24, 16, 32
        src = keras.Input((src_len,), dtype="int32")
        tgt = keras.Input((tgt_len,), dtype="int32")
        e = layers.Embedding(vocab, dim)(src) + layers.Embedding(src_len, dim)(keras.ops.arange(src_len))
        e = layers.LayerNormalization(epsilon=1e-6)(e + layers.MultiHeadAttention(4, dim // 4)(e, e))
        e = layers.LayerNormalization(epsilon=1e-6)(e + layers.Dense(dim)(layers.Dense(2 * dim, activation="relu")(e)))
        d = layers.Embedding(vocab, dim)(tgt) + layers.Embedding(tgt_len, dim)(keras.ops.arange(tgt_len))
        d = layers.LayerNormalization(epsilon=1e-6)(
            d + layers.MultiHeadAttention(4, dim // 4)(d, d, use_causal_mask=True))
        d = layers.LayerNormalization(epsilon=1e-6)(d + layers.MultiHeadAttention(4, dim // 4)(d, e))
        d = layers.LayerNormalization(epsilon=1e-6)(d + layers.Dense(dim)(layers.Dense(2 * dim, activation="relu")(d)))
        return keras.Model([src, tgt], layers.Dense(vocab, activation="softmax")(d))

    def lstm_seq2seq():
        src = keras.Input((12,), dtype="int32", batch_size=1)
        tgt = keras.Input((10,), dtype="int32", batch_size=1)
        _, h, c = layers.LSTM(32, return_state=True)(layers.Embedding(300, 24)(src))
        d = layers.LSTM(32, return_sequences=True)(layers.Embedding(200, 24)(tgt), initial_state=[h, c])
        return keras.Model([src, tgt], layers.TimeDistributed(layers.Dense(200, activation="softmax"))(d))

    def conv_autoencoder():
        img = keras.Input((28, 28, 1))
        x = layers.MaxPooling2D()(layers.Conv2D(16, 3, padding="same", activation="relu")(img))
        x = layers.MaxPooling2D()(layers.Conv2D(8, 3, padding="same", activation="relu")(x))
        x = layers.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")(x)
        x = layers.UpSampling2D()(layers.Conv2D(16, 3, padding="same", activation="relu")(x))
        return keras.Model(img, layers.Conv2D(1, 3, padding="same", activation="sigmoid")(x))

    def conv3d():
        clip = keras.Input((8, 16, 16, 3))
        x = layers.Conv3D(8, 3, padding="same", activation="relu")(clip)
        x = layers.Conv3D(16, (1, 3, 3), strides=(1, 2, 2))(x)
        x = layers.Conv3DTranspose(8, 3, strides=2, padding="same")(x)
        return keras.Model(clip, layers.Dense(4)(layers.GlobalAveragePooling3D()(x)))

    def rnn_variants(x):
        x = layers.Bidirectional(layers.GRU(16, return_sequences=True), merge_mode="sum")(x)
        x = layers.Bidirectional(layers.SimpleRNN(8, return_sequences=True), merge_mode="ave")(x)
        return layers.Dense(3)(layers.GRU(12, reset_after=False, go_backwards=True)(x))

    def top_k():
        inp = keras.Input((32,))
        scores = layers.Dense(20)(layers.Dense(64, activation="relu")(inp))

        class TopK(layers.Layer):
            def call(self, s):
                values, indices = tf.math.top_k(s, k=3)
                return [values, tf.cast(indices, tf.float32), tf.sort(s, direction="DESCENDING")]

        return keras.Model(inp, TopK()(scores))

    def masked_rnn():
        ids = keras.Input((20,), dtype="int32", batch_size=1)
        x = layers.Embedding(500, 24, mask_zero=True)(ids)
        x = layers.Bidirectional(layers.LSTM(16, return_sequences=True))(x)
        return keras.Model(ids, layers.Dense(4)(layers.GRU(16)(x)))

    def rnn_dropout(x):
        x = layers.Bidirectional(layers.LSTM(16, dropout=0.2, recurrent_dropout=0.2, return_sequences=True))(x)
        return layers.Dense(4)(layers.GRU(16, recurrent_dropout=0.2)(x))

    def augmented_cnn():
        img = keras.Input((32, 32, 3))
        x = layers.RandomZoom(0.1)(layers.RandomRotation(0.1)(layers.RandomFlip()(img)))
        x = layers.Conv2D(16, 3, activation="relu")(layers.Rescaling(1 / 255.0)(x))
        x = layers.Conv2D(32, 3, activation="relu")(layers.MaxPooling2D()(x))
        x = layers.GlobalAveragePooling2D()(layers.GroupNormalization(8)(x))
        return keras.Model(img, layers.Dense(10, activation="softmax")(x))

    def spectrogram():
        wave = keras.Input((4000,))

        class Spectrogram(layers.Layer):
            def call(self, x):
                return tf.math.log(tf.abs(tf.signal.stft(x, 256, 128, fft_length=256)) + 1e-6)

        x = layers.Conv1D(32, 3, activation="relu")(Spectrogram()(wave))
        return keras.Model(wave, layers.Dense(6, activation="softmax")(layers.GlobalAveragePooling1D()(x)))

    def layers_image():
        img = keras.Input((32, 32, 3))
        x = layers.Resizing(24, 32, crop_to_aspect_ratio=True)(img)
        x = layers.Conv2D(16, 3, padding="same", activation="mish")(x)
        x = layers.Conv2D(16, 3, groups=4, dilation_rate=2, padding="same")(x)
        x = layers.ReLU(max_value=6.0, negative_slope=0.1, threshold=0.2)(x)
        x = layers.CenterCrop(16, 20)(layers.SpatialDropout2D(0.2)(x))
        x = layers.Resizing(20, 20, interpolation="nearest")(x)
        x = layers.LayerNormalization(rms_scaling=True)(x)

        class LocalResponseNorm(layers.Layer):
            def call(self, x):
                return tf.nn.local_response_normalization(x, depth_radius=2, bias=1.0, alpha=0.5, beta=0.75)

        x = layers.MaxPooling2D(4)(LocalResponseNorm()(x))
        x = layers.Flatten()(x + layers.MultiHeadAttention(2, 8, attention_axes=(1, 2))(x, x))
        features = layers.Dense(12)(x)
        x = layers.Activation("selu")(layers.BatchNormalization()(features))
        return keras.Model(img, [layers.Dense(5, activation="log_softmax")(x), features])

    def layers_seq2():
        seq = keras.Input((24, 8), batch_size=1)
        x = layers.Conv1D(16, 3, padding="causal", dilation_rate=2, activation="softsign")(seq)
        x = layers.DepthwiseConv1D(3, depth_multiplier=2, padding="same")(x)
        x = layers.AveragePooling1D(2)(layers.SeparableConv1D(16, 3, padding="same")(x))
        x = x + layers.MultiHeadAttention(2, key_dim=8, value_dim=6)(x, x, use_causal_mask=True)
        x = x + layers.GroupQueryAttention(8, num_query_heads=4, num_key_value_heads=2)(x, x)
        x = layers.AdditiveAttention()([x, x])
        x = layers.Softmax(axis=1)(layers.EinsumDense("abc,cd->abd", output_shape=(None, 12), bias_axes="d")(x))

        class CumSum(layers.Layer):
            def call(self, x):
                return tf.math.cumsum(x, axis=1, exclusive=True, reverse=True)

        x = CumSum()(x)
        y, h = layers.GRU(10, go_backwards=True, return_sequences=True, return_state=True)(x)
        z = layers.LSTM(6, unroll=True)(y)
        return keras.Model(seq, [layers.Concatenate()([h, z]), y])

    def layers_video():
        clip = keras.Input((4, 16, 16, 3), batch_size=1)
        x = layers.ZeroPadding3D(((0, 0), (1, 1), (1, 1)))(clip)
        x = layers.ConvLSTM2D(8, 3, strides=2, return_sequences=True)(x)
        x = layers.UpSampling3D((1, 2, 2))(layers.Cropping3D(((1, 0), (0, 1), (1, 0)))(x))
        x = layers.ConvLSTM2D(8, 3, padding="same")(x)
        return keras.Model(clip, layers.Dense(3)(layers.GlobalMaxPooling2D()(x)))

    def layers_flex():
        clip = keras.Input((4, 12, 12, 3))
        frames = layers.Reshape((48, 12, 3))(clip)  # the frames stacked along the height
        x = layers.Reshape((4, 16, 16, 3))(layers.Resizing(64, 16, interpolation="bicubic")(frames))
        x = layers.Conv3D(8, 3, padding="same", activation="relu")(x)
        x = layers.MaxPooling3D((1, 2, 2))(x)
        x = layers.AveragePooling3D((2, 3, 3), strides=(2, 2, 2), padding="same")(x)  # [2, 4, 4, 8]
        x = layers.Conv2DTranspose(8, 3, dilation_rate=2, padding="same")(layers.Reshape((8, 4, 8))(x))
        x = layers.UpSampling2D(2, interpolation="bicubic")(x)
        return keras.Model(clip, layers.Dense(5)(layers.Flatten()(x)))

    int8 = {"optimizations": [tf.lite.Optimize.DEFAULT]}
    f16 = {"optimizations": [tf.lite.Optimize.DEFAULT], "target_spec.supported_types": [tf.float16]}
    return {
        "mobilenet_v2": (app(apps.MobileNetV2, 128, alpha=0.5), {}),
        "mobilenet_v2_int8": (app(apps.MobileNetV2, 128, alpha=0.5), int8),
        "mobilenet_v3_small": (app(apps.MobileNetV3Small, 128), {}),
        "resnet50": (app(apps.ResNet50, 64), {}),
        "densenet121": (app(apps.DenseNet121, 64), {}),
        "efficientnet_b0": (app(apps.EfficientNetB0, 96), {}),
        "xception": (app(apps.Xception, 71), {}),
        "inception_v3": (app(apps.InceptionV3, 75), {}),
        "inception_resnet_v2": (app(apps.InceptionResNetV2, 75), {}),
        "nasnet_mobile": (app(apps.NASNetMobile, 32), {}),
        "efficientnet_v2_b0": (app(apps.EfficientNetV2B0, 64), {}),
        "convnext_tiny": (app(apps.ConvNeXtTiny, 32), {}),
        "resnet50_v2": (app(apps.ResNet50V2, 64), {}),
        "vgg16": (app(apps.VGG16, 32), {}),
        "mobilenet_v3_small_minimal": (app(apps.MobileNetV3Small, 96, minimalistic=True), {}),
        "unet": (unet, {}),
        "transformer": (transformer, {}),
        "vit": (vit, {}),
        "conv1d": (conv1d, {}),
        "lstm": (text(lambda x: layers.Dense(4)(layers.LSTM(32)(x))), {}),
        "gru": (text(lambda x: layers.GRU(32)(layers.GRU(32, return_sequences=True)(x))), {}),
        "simple_rnn": (text(lambda x: layers.Dense(4)(layers.SimpleRNN(32)(x))), {}),
        "bilstm": (text(lambda x: layers.LSTM(16)(layers.Bidirectional(layers.LSTM(16, return_sequences=True))(x))),
                   {}),
        "slicing": (slicing, {}),
        "layers_2d": (layers_2d, {}),
        "layers_seq": (layers_seq, {}),
        "mobilenet_v3_large": (app(apps.MobileNetV3Large, 96), {}),
        "convnext_block": (convnext_block, {}),
        "autoencoder": (autoencoder, {}),
        "seq2seq": (seq2seq, {}),
        "lstm_seq2seq": (lstm_seq2seq, {}),
        "conv_autoencoder": (conv_autoencoder, {}),
        "mobilenet_v1": (app(apps.MobileNet, 128, alpha=0.5), {}),
        "conv3d": (conv3d, {}),
        "rnn_variants": (text(rnn_variants), {}),
        "transformer_int8": (transformer, int8),
        "lstm_f16": (text(lambda x: layers.Dense(4)(layers.LSTM(32)(x))), f16),
        "top_k": (top_k, {}),
        "masked_rnn": (masked_rnn, {}),
        "rnn_dropout": (text(rnn_dropout), {}),
        "augmented_cnn": (augmented_cnn, {}),
        "spectrogram": (spectrogram, {}),
        "layers_image": (layers_image, {}),
        "layers_seq2": (layers_seq2, {}),
        "layers_video": (layers_video, {}),
        "layers_flex": (layers_flex, {"target_spec.supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS,
                                                                     tf.lite.OpsSet.SELECT_TF_OPS]}),
        "mobilenet_v2_224": (app(apps.MobileNetV2, 224), {}),
        "mobilenet_v3_large_224": (app(apps.MobileNetV3Large, 224), {}),
        "resnet50_224": (app(apps.ResNet50, 224), {}),
        "efficientnet_b0_224": (app(apps.EfficientNetB0, 224), {}),
        "densenet121_224": (app(apps.DenseNet121, 224), {}),
        "xception_299": (app(apps.Xception, 299), {}),
    }


def seeded_model(build):
    """``build()``'s Keras model with its weights drawn again from a seeded normal distribution,
    so that the batch-norm statistics and the biases are not all 0/1 (a test that cannot tell
    them apart). Run in the TensorFlow environment."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(13)
    model = build()
    rng = np.random.default_rng(13)
    for w in model.weights:
        v = w.numpy()
        if "variance" in w.path:
            w.assign(rng.uniform(0.5, 1.5, v.shape).astype(v.dtype))
        elif v.dtype.kind == "f":
            fan_in = max(int(np.prod(v.shape[:-1])), 1) if v.ndim > 1 else 1
            w.assign((rng.standard_normal(v.shape) * (1.0 / math.sqrt(fan_in) if v.ndim > 1 else 0.1))
                     .astype(v.dtype))
    return model


def generate(out: pathlib.Path, names: list[str]) -> None:
    """Build and convert ``names`` into ``out/<name>.tflite`` (run in the TensorFlow environment)."""
    import tensorflow as tf

    out.mkdir(parents=True, exist_ok=True)
    archs = _architectures()
    for name in names:
        build, options = archs[name]
        start = time.perf_counter()
        model = seeded_model(build)
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        for key, value in options.items():
            if key == "target_spec.supported_types":  # float16 weights
                converter.target_spec.supported_types = value
            elif key == "target_spec.supported_ops":  # Select TF ops
                converter.target_spec.supported_ops = set(value)
            else:
                setattr(converter, key, value)
        try:
            data = converter.convert()
        except Exception as exc:  # noqa: BLE001 - reported, the other models still convert
            print(f"{name}: conversion failed: {str(exc).splitlines()[0][:300]}", flush=True)
            continue
        if "target_spec.supported_ops" in options:
            _write_tf_reference(model, data, out / f"{name}.ref.npz")
        tmp = out / f".{name}.tflite.tmp"
        tmp.write_bytes(data)
        tmp.rename(out / f"{name}.tflite")
        print(f"{name}: {len(data) / 1e6:.2f} MB, built and converted in {time.perf_counter() - start:.0f} s", flush=True)


def _write_tf_reference(model, data: bytes, path: pathlib.Path) -> None:
    """The seeded inputs (by the converted model's input names) and the Keras model's one output
    in TensorFlow, for a model LiteRT's Python interpreter cannot run (Select TF ops)."""
    import numpy as np
    import tensorflow as tf

    details = tf.lite.Interpreter(model_content=data).get_input_details()
    x = seeded_inputs(details)
    if len(model.outputs) != 1 or len(details) != 1:
        raise ValueError("a TensorFlow reference is written for one input and one output")
    y = np.asarray(model(next(iter(x.values()))))
    np.savez(path, y=y, **{f"x:{k}": v for k, v in x.items()})


def _tf_reference(path: pathlib.Path) -> tuple[dict, dict]:
    """(inputs, {"output": array}) written by :func:`_write_tf_reference`."""
    import numpy as np

    with np.load(path) as z:
        return {k[2:]: z[k] for k in z.files if k.startswith("x:")}, {"output": z["y"]}


# ----------------------------------------------------------------------------- compare (project venv)

#: The issue's tolerances on max |webnn - LiteRT| / max |LiteRT|.
TOLERANCE = {"float32": 1e-3, "float16": 3e-2}



def seeded_inputs(details: list[dict], seed: int = 0) -> dict[str, "np.ndarray"]:  # noqa: F821
    """One seeded array per LiteRT input detail: token ids (integers) in [0, 20), floats N(0, 1)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for d in details:
        shape = [int(v) for v in d["shape"]]
        if np.dtype(d["dtype"]).kind in "iu":
            out[d["name"]] = rng.integers(0, 20, shape).astype(d["dtype"])
        else:
            out[d["name"]] = rng.standard_normal(shape).astype(d["dtype"])
    return out


class LiteRT:
    """A LiteRT interpreter; ``run(inputs)`` sets every input by name, invokes, gets the outputs."""

    def __init__(self, data: bytes, *, threads: int, xnnpack: bool) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.it = Interpreter(model_content=data, num_threads=threads, experimental_op_resolver_type=resolver)
        self.it.allocate_tensors()
        self.inputs = {d["name"]: d["index"] for d in self.it.get_input_details()}
        self.outputs = {d["name"]: d["index"] for d in self.it.get_output_details()}

    def run(self, inputs: dict) -> dict:
        for name, index in self.inputs.items():
            self.it.set_tensor(index, inputs[name])
        self.it.invoke()
        return {name: self.it.get_tensor(i) for name, i in self.outputs.items()}


class WebNN:
    """The loaded model and its tensors; ``run(inputs)`` is write, dispatch, read every output."""

    def __init__(self, ctx, data, dtype: str = "float32", **options) -> None:
        import webnn_gpu as webnn

        self.ctx = ctx
        self.model = webnn.load(data, ctx, dtype=dtype, **options)  # options: the ONNX loader's dims, custom_ops
        g = self.model.graph
        self.t_in = {n: ctx.create_tensor({**d, "writable": True}) for n, d in g.inputs.items()}
        self.t_out = {n: ctx.create_tensor({**d, "readable": True}) for n, d in g.outputs.items()}

    def run(self, inputs: dict) -> dict:
        for name, t in self.t_in.items():
            self.ctx.write_tensor(t, inputs[name].astype(self.model.inputs[name]["data_type"], copy=False))
        self.ctx.dispatch(self.model.graph, self.t_in, self.t_out)
        return {n: self.ctx.read_tensor(t) for n, t in self.t_out.items()}


def bench_model(ctx, name: str, path: pathlib.Path, args) -> dict:
    import numpy as np
    import zoo

    data = path.read_bytes()
    row: dict = {"model": name}
    tf_ref = path.with_name(f"{name}.ref.npz")
    if tf_ref.exists():  # Select TF ops: TensorFlow's output, no LiteRT timing
        x, ref = _tf_reference(tf_ref)
    else:
        ref_rt = LiteRT(data, threads=1, xnnpack=False)
        x = seeded_inputs(ref_rt.it.get_input_details())
        ref = ref_rt.run(x)
    try:
        engine = WebNN(ctx, data, args.dtype)
    except Exception as exc:  # noqa: BLE001 - a row of the table, not a crash
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        return row
    # The loader names the inputs and outputs as the model does (LiteRT's names).
    got = engine.run({n: x[n] for n in engine.t_in})
    if tf_ref.exists():
        got = {"output": next(iter(got.values()))}
    row["max_error"] = max(float(np.abs(got[n].astype(np.float64) - r).max()) / max(float(np.abs(r).max()), 1e-30)
                           for n, r in ref.items())
    row["within_tolerance"] = row["max_error"] <= TOLERANCE[args.dtype]
    row["kernels"] = engine.model.graph.kernel_count
    if args.rounds:  # --rounds 0: errors and kernels only
        runners = {"webnn": lambda: engine.run(x)}
        if not tf_ref.exists():
            lite = LiteRT(data, threads=2, xnnpack=True)
            runners["xnnpack2"] = lambda: lite.run(x)
        med = zoo.alternate(runners, args.warmup, args.rounds, args.settle)
        row["webnn_ms"] = med["webnn"]
        if "xnnpack2" in med:
            row.update(xnnpack2_ms=med["xnnpack2"], ratio=med["webnn"] / med["xnnpack2"])
    if args.cold:
        row["first_build_s"] = zoo.fresh_build(path, args.dtype, {"MESA_SHADER_CACHE_DISABLE": "true"})
    return row


def format_table(rows: list[dict]) -> str:
    lines = ["| model | loads | max error / max abs ref | webnn-gpu ms | XNNPACK 2 threads ms | ratio | kernels | "
             "first build, Mesa's cache disabled s |", "| --- | --- " + "| ---: " * 6 + "|"]
    fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | no: {r['error']} | | | | | | |")
            continue
        mark = "" if r["within_tolerance"] else " (above tolerance)"
        lines.append(f"| {r['model']} | yes | {r['max_error']:.1e}{mark} | {fmt(r.get('webnn_ms'), '.2f')} | "
                     f"{fmt(r.get('xnnpack2_ms'), '.2f')} | {fmt(r.get('ratio'), '.1f')} | {r['kernels']} | "
                     f"{fmt(r.get('first_build_s'), '.1f')} |")
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    if ratios:
        lines.append("")
        lines.append(f"{sum('error' not in r for r in rows)} of {len(rows)} models load; geometric mean of the "
                     f"{len(ratios)} ratios "
                     f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.1f}, largest {max(ratios):.1f}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices={**MODELS, **STANDARD, **SLOW},
                        metavar="NAME", help="default: the small-size zoo (MODELS); the standard sizes (STANDARD) and "
                                             "the slow conversions (SLOW) by name")
    parser.add_argument("--standard", action="store_true", help="the standard-size applications (STANDARD) instead")
    parser.add_argument("--slow", action="store_true", help="the small-size applications slow to convert (SLOW) instead")
    parser.add_argument("--generate", metavar="DIR", help=argparse.SUPPRESS)  # the TF-side half
    parser.add_argument("--regenerate", action="store_true", help="convert the models again")
    parser.add_argument("--tf-python", default=str(DEFAULT_TF_PYTHON),
                        help="Python of a TensorFlow environment (default: %(default)s)")
    parser.add_argument("--dtype", default="float32", choices=list(TOLERANCE),
                        help="the graph's float type (LiteRT runs the float32 model)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds of untimed runs of each runner before its timed run (zoo.alternate; default 0)")
    parser.add_argument("--no-cold", dest="cold", action="store_false", help="skip the fresh-process cold builds")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.standard:
        args.models = list(STANDARD)
    if args.slow:
        args.models = list(SLOW)
    if args.generate:
        generate(pathlib.Path(args.generate), args.models)
        return 0

    out = cache_dir()
    missing = [n for n in args.models if args.regenerate or not (out / f"{n}.tflite").exists()]
    if missing:
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
        subprocess.run([args.tf_python, os.path.abspath(__file__), "--generate", str(out), "--models", *missing],
                       check=True, env=env)

    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import webnn_gpu as webnn

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import zoo  # the same timing and fresh-process build as the MediaPipe zoo

    rows = zoo.run_rows(webnn.ml.create_context(), {n: out / f"{n}.tflite" for n in args.models}, bench_model, args)
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
