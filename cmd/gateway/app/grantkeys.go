package app

import (
	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/grantsig"
)

// The values of --sign-grants.
const (
	signOnRequest = "on-request" // the grants whose calls ask (the default)
	signAlways    = "always"     // every grant whose call does not refuse
)

// grantSigner is the signer of grants --grant-keys asks for: its file's
// keys, a key made now, or none (off).
func grantSigner(cfg config, logger zerolog.Logger) (*grantsig.Signer, error) {
	var keys []grantsig.Key
	switch cfg.grantKeys {
	case "off":
		logger.Info().Msg("grants are not signed (--grant-keys off)")
		return nil, nil
	case "":
		k, err := grantsig.Generate()
		if err != nil {
			return nil, err
		}
		keys = []grantsig.Key{k}
		// A resource must fetch this gateway's own key set: with several
		// gateways, give them one --grant-keys file.
		logger.Info().Str("kid", k.ID).Msg("grants are signed with a key made at start (--grant-keys)")
	default:
		var err error
		if keys, err = grantsig.LoadFile(cfg.grantKeys); err != nil {
			return nil, err
		}
		logger.Info().Str("kid", keys[0].ID).Int("published", len(keys)).Msg("grants are signed with the first key of --grant-keys")
	}
	if cfg.signGrants == signAlways {
		logger.Info().Msg(`every grant is signed unless its call says "signed": false (--sign-grants always)`)
	} else {
		logger.Info().Msg(`a grant is signed when its call says "signed": true (--sign-grants on-request)`)
	}
	return grantsig.NewSigner(cfg.grantIssuer, keys)
}
