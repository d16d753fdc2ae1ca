// The test KMS of tests/encryption/keys.py (InServerWrapKms) for parquet-java's key tools:
// master keys held in memory by id, a key wrapped by AES-GCM with its master key (nonce |
// ciphertext | tag, base64) and the master key id as AAD, as parquet-java's own test
// InMemoryKMS and Arrow C++'s TestOnlyInServerWrapKms do. Spark loads it by name
// (parquet.encryption.kms.client.class=InMemoryKms) with its master keys in
// parquet.encryption.key.list ("id: base64 key, id: base64 key").

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.crypto.KeyAccessDeniedException;
import org.apache.parquet.crypto.keytools.KeyToolkit;
import org.apache.parquet.crypto.keytools.KmsClient;

public class InMemoryKms implements KmsClient {
  public static final String KEY_LIST_PROPERTY_NAME = "parquet.encryption.key.list";

  private final Map<String, byte[]> masterKeys = new HashMap<>();

  @Override
  public void initialize(Configuration configuration, String kmsInstanceID, String kmsInstanceURL,
      String accessToken) throws KeyAccessDeniedException {
    String[] entries = configuration.getTrimmedStrings(KEY_LIST_PROPERTY_NAME);
    if (entries == null || entries.length == 0) {
      throw new KeyAccessDeniedException("no " + KEY_LIST_PROPERTY_NAME + " configured");
    }
    for (String entry : entries) {
      String[] pair = entry.split(":", 2);
      masterKeys.put(pair[0].trim(), Base64.getDecoder().decode(pair[1].trim()));
    }
  }

  private byte[] masterKey(String id) throws KeyAccessDeniedException {
    byte[] key = masterKeys.get(id);
    if (key == null) {
      throw new KeyAccessDeniedException("no master key " + id);
    }
    return key;
  }

  @Override
  public String wrapKey(byte[] keyBytes, String masterKeyIdentifier)
      throws KeyAccessDeniedException {
    byte[] aad = masterKeyIdentifier.getBytes(StandardCharsets.UTF_8);
    return KeyToolkit.encryptKeyLocally(keyBytes, masterKey(masterKeyIdentifier), aad);
  }

  @Override
  public byte[] unwrapKey(String wrappedKey, String masterKeyIdentifier)
      throws KeyAccessDeniedException {
    byte[] aad = masterKeyIdentifier.getBytes(StandardCharsets.UTF_8);
    return KeyToolkit.decryptKeyLocally(wrappedKey, masterKey(masterKeyIdentifier), aad);
  }
}
