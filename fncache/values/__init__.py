"""The values wing: any Python value -> the canonical stream its key is made of."""
