package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"herald/http/internal/apitest"
)

// TestWebClientLive: what one person does reaches the other's open page
// through the live stream, with no reload: a new message (announced, and
// without controls for someone else's), its edit, its deletion. A search's
// filters apply to the stream too. When the token is revoked elsewhere,
// the page notices and goes back to the login screen.
func TestWebClientLive(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	const (
		adaEmail, adaPassword = "ada@example.com", "correct horse battery"
		bobEmail, bobPassword = "bob@example.com", "staple battery horse"
	)
	ada := b.person("ada")
	ada.screen("auth")
	ada.register(adaEmail, adaPassword, false)
	bob := b.person("bob")
	bob.screen("auth")
	bob.register(bobEmail, bobPassword, false)
	for _, p := range []*webPerson{ada, bob} {
		p.liveOn()
	}

	// A new message arrives at Bob's, announced, with no controls.
	const live = "Posted by Ada while Bob watches"
	ada.post(live)
	bob.waitFor("Ada's message arrives", messageJS(live))
	sel := bob.messageSelector(live)
	if n := webEval[int](bob, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel+" button")); n != 0 {
		t.Errorf("Bob sees %d buttons on Ada's live message, want none", n)
	}
	if got, want := bob.text("#notice"), "New message from "+bob.text(sel+" .owner")+"."; got != want {
		t.Errorf("Bob's page announces %q, want %q", got, want)
	}
	if got := webEval[int](bob, `document.querySelectorAll('#messages > li').length`); got != 1 {
		t.Errorf("Bob's timeline shows %d messages, want 1", got)
	}

	// Ada's edit and deletion follow.
	const edited = "Posted by Ada, and then edited"
	mine := ada.messageSelector(live)
	ada.click(mine + " button[data-act=edit]")
	ada.fill(mine+" form.edit textarea", edited)
	ada.click(mine + " button[data-act=save]")
	bob.waitFor("the edit arrives", messageJS(edited))
	mine = ada.messageSelector(edited)
	ada.click(mine + " button[data-act=delete]")
	ada.click(mine + " button[data-act=remove]")
	bob.waitFor("the deletion arrives", "!"+messageJS(edited))

	// Under a search for his own messages, Ada's new one stays away while
	// his own, posted after it, arrives.
	bob.search("", bobEmail)
	bob.liveOn()
	ada.post("Ada again, not Bob's")
	const bobs = "Bob's own, after Ada's"
	bob.fill("#post-content", bobs)
	bob.click("#post-form button[type=submit]")
	bob.waitFor("his message arrives through the stream", messageJS(bobs))
	if got := bob.timelineContents(); len(got) != 1 {
		t.Errorf("Bob's search for his own shows %q", got)
	}

	// Ada signs out everywhere from another device: her page's stream is
	// refused on its next try, and the page goes back to the login screen.
	ada.expect(http.StatusUnauthorized, "/api/messages/stream")
	other := e.Login(adaEmail, adaPassword)
	if res := e.Do(apitest.Request{Method: "DELETE", Path: "/api/me/tokens", Token: other}); res.Status != http.StatusNoContent {
		t.Fatalf("signing out everywhere: status %d: %s", res.Status, res.Body)
	}
	ada.screen("auth")
	if got := ada.text("#notice"); !strings.Contains(got, "session has ended") {
		t.Errorf("after the token was revoked Ada's page says %q", got)
	}
}
