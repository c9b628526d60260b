"""Data for the course, one module per kind; this file holds no code, it only re-exports
their public names, which the notebooks and the assignments read as ``data.<name>``
(``from course_utils import data``). Modules of the package import from the submodule that
holds a name, never from here (tests/test_architecture.py holds it). In import order, each
module imports only those listed above it:

- ``course_utils.data.splits``: ``Splits`` (train, valid, test), what every loader returns.
- ``course_utils.data.vocab``: word-level tokens (``normalize``, ``tokenize``), ``Vocab`` and
  its special tokens, ``TranslationData``, padded length-bucketed batches (``Batch``,
  ``pad_sequences``), ``check_src_batch``, length buckets (``bucket_label``). Taught in 01.
- ``course_utils.data.corpora``: the checksummed shipped corpora (``load_es_en``,
  ``es_en_splits``, the Austen novels ``load_english_text``), ``data_dir``,
  ``verified_path``, ``recorded_checksums``, ``REBUILD``; data cards in ``data/*.md``.
- ``course_utils.data.images``: scikit-learn's digits (``load_digit_images``) and
  ``check_images``. Taught in 08.
- ``course_utils.data.lexicon``: 00's alignment sketch from co-occurrence
  (``association_lexicon``, ``alignment_sketch``).
- ``course_utils.data.synthetic``: the synthetic English -> German task (``load_synthetic``;
  its data card is that module's docstring). Taught in 00 and 01.
"""

from course_utils.data.splits import Splits
from course_utils.data.vocab import (DEFAULT_BUCKET_EDGES, EOS, EOS_ID, PAD, PAD_ID, SOS, SOS_ID, SPECIALS,
                                     UNK, UNK_ID, Batch, TranslationData, Vocab, bucket_label, bucket_labels,
                                     check_src_batch, normalize, pad_sequences, tokenize)
from course_utils.data.corpora import (REBUILD, DataChecksumError, Paragraph, data_dir, es_en_splits,
                                       load_english_text, load_es_en, recorded_checksums, sha256_file,
                                       verified_path)
from course_utils.data.images import ImageSplit, check_images, load_digit_images
from course_utils.data.lexicon import alignment_sketch, association_lexicon
from course_utils.data.synthetic import (NOUNS, NUMBER_COUNTERPARTS, SYNTHETIC_KINDS, SYNTHETIC_VERSION,
                                         load_synthetic, split_german_number, synthetic_example,
                                         synthetic_kind, synthetic_pairs)

__all__ = [
    # splits
    "Splits",
    # vocab
    "DEFAULT_BUCKET_EDGES", "EOS", "EOS_ID", "PAD", "PAD_ID", "SOS", "SOS_ID", "SPECIALS", "UNK", "UNK_ID",
    "Batch", "TranslationData", "Vocab", "bucket_label", "bucket_labels", "check_src_batch", "normalize",
    "pad_sequences", "tokenize",
    # corpora
    "REBUILD", "DataChecksumError", "Paragraph", "data_dir", "es_en_splits", "load_english_text", "load_es_en",
    "recorded_checksums", "sha256_file", "verified_path",
    # images
    "ImageSplit", "check_images", "load_digit_images",
    # lexicon
    "alignment_sketch", "association_lexicon",
    # synthetic
    "NOUNS", "NUMBER_COUNTERPARTS", "SYNTHETIC_KINDS", "SYNTHETIC_VERSION", "load_synthetic",
    "split_german_number", "synthetic_example", "synthetic_kind", "synthetic_pairs",
]
